"""OpenTelemetry's SDK in a worker process of the engine's tests: imported by
``crash_agent`` when ``ENGINE_TEST_OTEL=1``.

It sets the global tracer and meter providers, as an application does. Spans go
to the SDK's in-memory exporter and, as each one ends, to
``$ENGINE_TEST_DIR/spans-<pid>.jsonl`` (a SIGKILLed process keeps what it wrote);
the metrics are written to ``metrics-<pid>.json`` when the process exits.
"""

from __future__ import annotations

import atexit
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

DIR = Path(os.environ.get("ENGINE_TEST_DIR", "."))


class FileExporter(InMemorySpanExporter):
    """The in-memory exporter, also writing each span to this process's file."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(DIR / f"spans-{os.getpid()}.jsonl", "a", encoding="utf-8") as f:
            for s in spans:
                f.write(json.dumps(json.loads(s.to_json())) + "\n")
        return super().export(spans)


def dump_metrics() -> None:
    data = reader.get_metrics_data()
    points: dict[str, list[dict[str, Any]]] = {}
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                points[m.name] = [json.loads(p.to_json()) for p in m.data.data_points]
    (DIR / f"metrics-{os.getpid()}.json").write_text(json.dumps(points))


tracer_provider = TracerProvider()
tracer_provider.add_span_processor(SimpleSpanProcessor(FileExporter()))
trace.set_tracer_provider(tracer_provider)
reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
atexit.register(dump_metrics)
