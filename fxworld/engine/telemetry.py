"""OpenTelemetry traces and metrics of the turns a worker runs (``fxworld[otel]``).

fxworld never imports OpenTelemetry on its own: it looks at it only once the
application has (``opentelemetry.trace`` is in ``sys.modules``) and has set a global
tracer or meter provider. Otherwise every run gets :data:`OFF`, whose methods do
nothing, and the caller's trace context is not looked for.

Spans follow the OpenTelemetry GenAI semantic conventions, version
:data:`SEMCONV_VERSION` (Development status): per turn that a run takes part in,
``invoke_agent <agent>``; per model call, ``chat <model>``; per tool run,
``execute_tool <tool>``. All of one turn share ONE trace: a prompt's entry keeps
the W3C trace context of its caller (:func:`trace_context`), and every run, in any
process, parents its turn span to it. A run that takes a turn over after its
previous holder died (the wake delivered again) adds a ``fxworld.takeover`` event
and links its span to the span that started the turn (kept in ``turn.started``);
for a prompt sent outside any span, that span is the parent instead, so the turn
is still one trace.
Content (prompts, tool input and output) is recorded only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.

This module is what the engine calls (:class:`RunTelemetry`, :class:`Call`), their
do-nothing forms, and the metrics' instruments (:class:`Instruments`), made once per
provider; :mod:`fxworld.engine._run.otel` is what a run does when a provider is
set. ``docs/observability.md`` lists every span, attribute and metric.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Final

from fxworld.models.base import Model, ModelResponse
from fxworld.types import Entry, Fence

from .replay import CallState, Replay, Step

__all__ = [
    "SEMCONV_VERSION",
    "SCHEMA_URL",
    "CAPTURE_CONTENT",
    "TRACE_FIELD",
    "OFF",
    "RunTelemetry",
    "Call",
    "api",
    "capture_content",
    "trace_context",
    "Instruments",
    "providers",
    "approvals_waiting",
]

SEMCONV_VERSION: Final = "1.41.0"
"""The version of the OpenTelemetry semantic conventions the spans and metrics follow."""
SCHEMA_URL: Final = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
CAPTURE_CONTENT: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""Set it to ``true`` to record prompts, tool input and tool output on spans."""
TRACE_FIELD: Final = "trace"
"""The field of a ``prompt`` entry that keeps its caller's trace context, and of a
``turn.started`` entry that keeps the context of the span that started the turn."""


def api() -> Any:
    """``opentelemetry.trace`` when the application imported it, else None (fxworld
    never imports it first)."""
    return sys.modules.get("opentelemetry.trace")


def trace_context() -> dict[str, Any]:
    """``{"trace": carrier}``: the caller's trace context (the global propagator's,
    W3C ``traceparent`` by default), for a prompt's entry; ``{}`` when there is no
    current span."""
    otel = api()
    if otel is None or not otel.get_current_span().get_span_context().is_valid:
        return {}
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return {TRACE_FIELD: carrier}


def capture_content() -> bool:
    """Whether to record content on spans (:data:`CAPTURE_CONTENT`)."""
    return os.environ.get(CAPTURE_CONTENT, "").lower() == "true"


class Call:
    """A model call's or a tool run's span; this one does nothing (telemetry off)."""

    def response(self, response: ModelResponse) -> None:
        """The model's reply: its usage."""

    def result(self, output: str, is_error: bool) -> None:
        """The tool's result."""

    def cut(self, why: str) -> None:
        """A signal cut the call, or it failed."""

    def end(self) -> None: ...

    def attach(self) -> object:
        """Make the span current (the tool's own spans nest under it); a token."""
        return None

    def detach(self, token: object) -> None: ...


class RunTelemetry:
    """What a session run reports; this one reports nothing (:data:`OFF`)."""

    def taken(self, fence: Fence, state: Replay, last: Entry | None) -> None:
        """The session was acquired and its log read; ``last``: the newest entry
        before the fence (the one that made the wake due, often)."""

    def step(self, step: Step, state: Replay) -> None:
        """Before a step: the turn it belongs to has its span."""

    def stepped(self, step: Step, state: Replay) -> None:
        """After a step: counted; a turn that ended has its span ended."""

    def chat(self, model: Model) -> Call:
        return _NO_CALL

    def tool(self, c: CallState, attempt: int) -> Call:
        return _NO_CALL

    def approvals(self, delta: int) -> None:
        """Calls that began (or stopped) waiting for a person."""

    def turn_trace(self) -> dict[str, Any]:
        """``{"trace": carrier}``: the open turn span's context, for ``turn.started``
        (``{}`` without one)."""
        return {}

    def end(self, outcome: str) -> None:
        """The run ended (``outcome``: why); the open turn span ends with it."""


_NO_CALL: Final = Call()
OFF: Final = RunTelemetry()
"""The telemetry of a run when the application set no provider: nothing, at no cost."""


class Instruments:
    """The metrics, made once per meter provider."""

    def __init__(self, meter: Any) -> None:
        self.steps = meter.create_counter("fxworld.steps", "{step}", "Steps a worker ran")
        self.turns = meter.create_counter("fxworld.turns", "{turn}", "Turns that ended")
        self.takeovers = meter.create_counter(
            "fxworld.takeovers", "{takeover}", "Turns taken over after their worker died"
        )
        self.tool_duration = meter.create_histogram(
            "fxworld.tool.duration", "s", "How long a tool run took"
        )
        self.wake_lag = meter.create_histogram(
            "fxworld.wake.lag", "s", "From a wake's due time to a worker taking it"
        )
        self.approvals = meter.create_up_down_counter(
            "fxworld.approvals.waiting", "{call}", "Calls waiting for a person's decision"
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage", "{token}", "Tokens used per model call"
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration", "s", "How long a model call took"
        )


_made: dict[str, tuple[Any, Any]] = {}
"""Per kind ("tracer", "meter"): (the provider, what was made of it)."""


def _of(kind: str, provider: Any, make: Any) -> Any:
    held = _made.get(kind)
    if held is None or held[0] is not provider:
        held = _made[kind] = (provider, make(provider))
    return held[1]


def providers() -> tuple[Any, Any]:
    """The tracer and the instruments of the providers the application set (None: unset)."""
    otel = api()
    if otel is None:
        return None, None
    tracer = None
    provider = otel.get_tracer_provider()
    if not isinstance(provider, otel.ProxyTracerProvider | otel.NoOpTracerProvider):
        tracer = _of("tracer", provider, _tracer)
    instruments = None
    from opentelemetry import metrics

    mp = metrics.get_meter_provider()
    if not isinstance(mp, metrics.NoOpMeterProvider) and type(mp).__name__ != "_ProxyMeterProvider":
        instruments = _of(
            "meter", mp, lambda p: Instruments(p.get_meter("fxworld", None, SCHEMA_URL))
        )
    return tracer, instruments


def _tracer(provider: Any) -> Any:
    return provider.get_tracer("fxworld", None, SCHEMA_URL)


def approvals_waiting(delta: int) -> None:
    """A decision saved from any process: one call less waits (when metrics are on)."""
    _tracer_unused, instruments = providers()
    if instruments is not None:
        instruments.approvals.add(delta)
