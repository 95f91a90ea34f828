"""A sync function still running in its thread when its call is cut (its tool's
timeout, the user's stop) is not stopped: a thread cannot be. What the model and the
log are told says so, and what the thread does in the end is saved (``tool.late``),
in a real worker process on every world."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import crash_agent
import pytest
from conftest import SURVIVOR_LEASE, client, read_jsonl

from fxworld import StreamEvent, TurnStopped
from tests.support.waiting import wait_until, wait_until_async

pytestmark = pytest.mark.timeout(120)


def _kinds(stored: list[StreamEvent], kind: str) -> list[StreamEvent]:
    return [e for e in stored if e.kind == kind]


def _started(tmp_path: Path, name: str) -> bool:
    return any(
        r.get("tool") == name and r.get("started") for r in read_jsonl(tmp_path / "runs.jsonl")
    )


async def _late(agent: Any, sid: str) -> list[StreamEvent]:
    """Wait for the session's ``tool.late`` entry; all of its entries then."""
    stored: list[StreamEvent] = []

    async def landed() -> bool:
        stored[:] = await agent.session(sid).read()
        return bool(_kinds(stored, "tool.late"))

    await wait_until_async(landed, 60)
    return stored


async def test_a_sync_tool_past_its_timeout_is_told_as_running_and_its_late_refund_is_saved(
    engine_world_url: str, start_worker: Any, tmp_path: Path
) -> None:
    agent = client(engine_world_url)
    turn = agent.session().prompt("Refund order A.")
    sid = (await turn.accepted).session_id
    worker = start_worker(lease=SURVIVOR_LEASE, env={"ENGINE_TEST_SCRIPT": "ghost"})
    # the turn went on past the timeout while the refund's thread still waits
    assert await asyncio.wait_for(turn, 60) == crash_agent.GHOST_FINAL
    assert read_jsonl(tmp_path / "effects.jsonl") == []
    stored = await agent.session(sid).read()
    [done] = _kinds(stored, "tool.finished")
    expected = (
        "ToolTimedOut: tool 'refund_sync' did not finish within its timeout of 0.5 s, and it "
        "was NOT stopped: a sync function runs in a thread, which cannot be stopped, so it "
        "may still complete and its effects may still happen. Check whether they did before "
        "calling it again"
    )
    assert done.data["output"] == expected and done.data["is_error"] is True
    assert done.data["running"] == ["tool:refund_sync"]  # the log: timed out, still running
    heard = read_jsonl(tmp_path / "model.jsonl")[1]["messages"][-1]
    assert heard["role"] == "tool" and heard["is_error"] is True and heard["text"] == expected

    # A stopping worker waits for the thread, and saves its outcome before it exits.
    worker.signal(signal.SIGTERM)
    worker.wait_for_log("waiting for 1 thread(s)")
    (tmp_path / "go").touch()
    assert await worker.wait() == 0, worker.text()
    assert [e["effect"] for e in read_jsonl(tmp_path / "effects.jsonl")] == ["refund"]
    stored = await agent.session(sid).read()
    [late] = _kinds(stored, "tool.late")
    assert late.data["execution_id"] == done.data["execution_id"]
    assert late.data["part"] == "tool:refund_sync" and "step" not in late.data
    assert late.data["output"] == "refunded A" and late.data["is_error"] is False
    assert [e.kind for e in stored][-1:] == ["tool.late"]  # after the turn's end
    assert "tool:refund_sync ended in its thread after its call was cut" in worker.text()


async def test_a_stop_during_a_sync_step_says_it_runs_on_and_its_late_result_is_saved(
    engine_world_url: str, start_worker: Any, tmp_path: Path
) -> None:
    agent = client(engine_world_url)
    turn = agent.session().prompt("Refund order A.")
    sid = (await turn.accepted).session_id
    worker = start_worker(lease=SURVIVOR_LEASE, env={"ENGINE_TEST_SCRIPT": "ghost_step"})
    await wait_until(lambda: _started(tmp_path, "step:refund"), 60)
    await agent.session(sid).stop(reason="wrong order")
    with pytest.raises(TurnStopped):
        await asyncio.wait_for(turn, 60)
    stored = await agent.session(sid).read()
    [cut] = _kinds(stored, "tool.interrupted")
    assert cut.data["running"] == ["step:refund"]
    assert cut.data["message"] == (
        "The call to tool 'refund_steps' was cancelled: the user stopped the turn, but its "
        "step 'refund' was NOT stopped: a sync function runs in a thread, which cannot be "
        "stopped, so it may still complete and its effects may still happen. Check whether "
        "they did before calling the tool again. Its step 'reserve' finished: its effect "
        "happened, once, and calling the tool again would repeat it."
    )
    assert not _kinds(stored, "tool.late") and read_jsonl(tmp_path / "effects.jsonl") == []
    steps = [(e.kind, e.data["step"]) for e in stored if e.kind.startswith("step.")]
    assert ("step.finished", "refund") not in steps

    (tmp_path / "go").touch()  # the step's thread ends after the turn was stopped
    stored = await _late(agent, sid)
    [late] = _kinds(stored, "tool.late")
    assert late.data["part"] == "step:refund" and late.data["step"] == "refund"
    assert late.data["output"] == "refunded A" and late.data["is_error"] is False
    assert [e.kind for e in stored][-2:] == ["turn.stopped", "tool.late"]
    assert [e["effect"] for e in read_jsonl(tmp_path / "effects.jsonl")] == ["refund"]
    worker.signal(signal.SIGTERM)
    assert await worker.wait() == 0, worker.text()
