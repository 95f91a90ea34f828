"""OpenTelemetry across real worker processes: one trace per turn, through a SIGKILL.

The test process prompts inside a span of its own (as an HTTP handler would);
the workers run with the SDK's in-memory exporter as their global provider
(``tests/engine/otel_setup.py``), each writing its spans to a file as they end.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import crash_agent
import pytest
from conftest import SURVIVOR_LEASE, client, read_jsonl
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

pytestmark = [pytest.mark.timeout(120), pytest.mark.engine_worlds("sqlite", "postgres")]

OTEL = {"ENGINE_TEST_OTEL": "1"}


def caller() -> tuple[Any, InMemorySpanExporter]:
    """A tracer of the test process (not the global provider: the test process
    stays as an application without OpenTelemetry set up)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), exporter


def spans_of(tmp: Path, pid: int) -> list[dict[str, Any]]:
    return read_jsonl(tmp / f"spans-{pid}.jsonl")


def metrics_of(tmp: Path, pid: int) -> dict[str, list[dict[str, Any]]]:
    points: dict[str, list[dict[str, Any]]] = json.loads((tmp / f"metrics-{pid}.json").read_text())
    return points


def total(points: list[dict[str, Any]], **attrs: Any) -> float:
    """The sum of the points (counters) or of their counts (histograms) with ``attrs``."""
    chosen = [p for p in points if all(p["attributes"].get(k) == v for k, v in attrs.items())]
    return sum(p.get("value", p.get("count", 0)) for p in chosen)


def named(spans: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"].startswith(prefix)]


async def test_one_trace_across_a_sigkill(
    start_worker, engine_world_url: str, tmp_path: Path
) -> None:
    tracer, exporter = caller()
    agent = client(engine_world_url)
    with tracer.start_as_current_span("POST /sessions"):
        turn = agent.session().prompt("Please charge order A.")
        sid = (await turn.accepted).session_id
    (root,) = exporter.get_finished_spans()
    trace_id = f"0x{root.context.trace_id:032x}"
    # beside the workers' files: scripts/render_trace.py draws the whole trace
    (tmp_path / "spans-caller.jsonl").write_text(json.dumps(json.loads(root.to_json())) + "\n")

    first = start_worker(env={**OTEL, "FXWORLD_TEST_CRASH_AT": "in-tool:lookup"})
    assert await first.wait() == -signal.SIGKILL, first.text()
    second = start_worker(lease=SURVIVOR_LEASE, env=OTEL, args=("--log-format", "json"))
    assert await turn == crash_agent.FINAL
    second.signal(signal.SIGTERM)
    assert await second.wait() == 0, second.text()

    dead, alive = spans_of(tmp_path, first.pid), spans_of(tmp_path, second.pid)
    # The killed worker's ended spans (its first model call) and all the second
    # worker's spans are in the caller's trace.
    assert [s["name"] for s in dead] == ["chat scripted"]
    assert {s["context"]["trace_id"] for s in dead + alive} == {trace_id}
    every = dead + alive
    assert all(s["attributes"]["gen_ai.conversation.id"] == sid for s in every)
    assert all("gen_ai.operation.name" in s["attributes"] for s in every)

    # The second worker's turn span: a child of the caller's span, marked as a
    # takeover, linked to the span that started the turn in the dead worker.
    (agent_span,) = named(alive, "invoke_agent")
    assert agent_span["parent_id"] == f"0x{root.context.span_id:016x}"
    attrs = agent_span["attributes"]
    assert attrs["fxworld.takeover"] is True and attrs["fxworld.delivery"] == 2
    assert attrs["fxworld.epoch"] == 2 and attrs["fxworld.turn.outcome"] == "finished"
    assert [e["name"] for e in agent_span["events"]] == ["fxworld.takeover"]
    (link,) = agent_span["links"]
    assert link["context"]["span_id"] == dead[0]["parent_id"]  # the dead worker's turn span

    stored = await agent.session(sid).read()
    turn_id = next(e.data["turn"] for e in stored if e.kind == "turn.started")
    assert attrs["fxworld.turn"] == turn_id
    assert all(s["attributes"]["fxworld.turn"] == turn_id for s in every)
    lookups = named(alive, "execute_tool lookup")
    assert [s["attributes"]["fxworld.rerun"] for s in lookups] == [True]
    started = [e for e in stored if e.kind == "tool.started" and e.data["name"] == "lookup"]
    assert lookups[0]["attributes"]["fxworld.execution_id"] == started[0].data["execution_id"]
    assert lookups[0]["attributes"]["gen_ai.tool.call.id"] == started[0].data["call_id"]
    assert [s["name"] for s in named(alive, "execute_tool")] == [
        "execute_tool lookup",
        "execute_tool charge",
    ]
    chats = named(alive, "chat")
    assert len(chats) == 2 and all(
        s["parent_id"] == agent_span["context"]["span_id"] for s in chats
    )
    assert all(s["attributes"]["gen_ai.usage.output_tokens"] >= 0 for s in chats + dead)
    # no content unless asked for: no prompt, no tool input or output (looked for by
    # words, not by the amount 1250, which a random id or a timestamp may hold)
    assert not any("Please charge" in json.dumps(s) or "cents" in json.dumps(s) for s in every)

    m = metrics_of(tmp_path, second.pid)
    assert total(m["fxworld.takeovers"]) == 1
    assert total(m["fxworld.turns"], **{"fxworld.turn.outcome": "finished"}) == 1
    assert total(m["gen_ai.client.token.usage"], **{"gen_ai.token.type": "output"}) == 2
    assert total(m["gen_ai.client.operation.duration"]) == 2
    assert total(m["fxworld.tool.duration"]) == 2

    # --log-format json: one JSON object per line; the run's lines carry the session and turn
    lines = [json.loads(line) for line in second.text().splitlines() if line.strip()]
    taken = [x for x in lines if x["message"].startswith(f"session {sid}: taken")]
    assert taken and taken[0]["session_id"] == sid and taken[0]["turn"] == turn_id


async def test_a_turn_waiting_for_approval_stays_one_trace(
    start_worker, engine_world_url: str, tmp_path: Path
) -> None:
    """A turn parked for a person and finished by another worker, prompted outside
    any span: one trace, rooted at the first worker's turn span; the approvals
    waiting and the wake lag are measured; content only when asked for."""
    agent = client(engine_world_url)
    env = {**OTEL, "ENGINE_TEST_SCRIPT": "approval"}
    turn = agent.session().prompt("Refund order A.")
    sid = (await turn.accepted).session_id

    asking = start_worker(env=env, args=("--until-idle",))
    assert await asking.wait() == 0, asking.text()
    (pending,) = await agent.session(sid).pending_approvals()
    await agent.session(sid).approve(pending.execution_id)
    capture = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    running = start_worker(env={**env, **capture}, args=("--until-idle",))
    assert await running.wait() == 0, running.text()
    assert await turn == crash_agent.REFUND_FINAL

    before, after = spans_of(tmp_path, asking.pid), spans_of(tmp_path, running.pid)
    assert len({s["context"]["trace_id"] for s in before + after}) == 1
    turn_spans = named(before, "invoke_agent") + named(after, "invoke_agent")
    assert [s["parent_id"] for s in turn_spans] == [None, turn_spans[0]["context"]["span_id"]]
    assert [s["attributes"]["fxworld.takeover"] for s in turn_spans] == [False, False]
    assert turn_spans[0]["events"][0]["attributes"]["fxworld.reason"] == "run ended"
    (refund,) = named(after, "execute_tool refund")
    assert json.loads(refund["attributes"]["gen_ai.tool.call.arguments"]) == pending.input
    assert "refunded 500 cents" in refund["attributes"]["gen_ai.tool.call.result"]

    waiting = metrics_of(tmp_path, asking.pid)["fxworld.approvals.waiting"]
    assert total(waiting) == 1
    for pid in (asking.pid, running.pid):  # from the prompt, then from the decision
        assert total(metrics_of(tmp_path, pid)["fxworld.wake.lag"]) == 1


def test_without_a_provider_opentelemetry_is_never_imported(tmp_path: Path) -> None:
    """An application that never imports OpenTelemetry runs turns without it."""
    code = (
        "import asyncio, sys\n"
        "from fxworld import Agent, MemoryWorld\n"
        "from fxworld.testing import ScriptedModel\n"
        "async def main():\n"
        "    agent = Agent(ScriptedModel(['hi']), world=MemoryWorld())\n"
        "    turn = agent.session('s').prompt('hello')\n"
        "    await agent.work(until_idle=True)\n"
        "    assert await turn == 'hi'\n"
        "    entries = await agent.world.read('s', 0)\n"
        "    assert 'trace' not in entries[0].data and 'trace' not in entries[1].data\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
