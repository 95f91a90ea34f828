"""Approvals and stop in one process, on MemoryWorld: what the model hears, the
errors a caller gets, and async tools cut by a stop. (Across processes and on
every backend: test_approvals_procs.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fxworld import Agent, Approval, MemoryWorld, Tool, TurnFailed, TurnStopped, tool
from fxworld.errors import AlreadyDecided, InvalidArgument, UnknownCall
from fxworld.models.base import ModelError, ModelEvent, ModelRequest
from fxworld.testing import ScriptedModel, read_recording

pytestmark = pytest.mark.timeout(60)


@tool(needs_approval=True)
def refund_order(id: str) -> str:
    """Refund an order."""
    return f"refunded {id}"


@tool(idempotent=True)
def lookup(id: str) -> str:
    """Look an order up."""
    return f"{id}: paid"


def make(replies: list[object], tmp_path: Path, *tools: Tool) -> Agent:
    return Agent(
        ScriptedModel(replies, record_to=tmp_path / "model.jsonl"),  # type: ignore[arg-type]
        tools=list(tools) or [refund_order, lookup],
        world=MemoryWorld(),
    )


async def until_idle(agent: Agent) -> None:
    await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)


BOTH = [{"tool": "refund_order", "input": {"id": "A"}}, {"tool": "lookup", "input": {"id": "A"}}]


async def test_calls_needing_no_approval_run_and_a_denial_is_the_calls_result(
    tmp_path: Path,
) -> None:
    agent = make([BOTH, "Not refunded."], tmp_path)
    session = agent.session()
    turn = session.prompt("Refund A.")
    await turn.accepted
    await until_idle(agent)  # returns: the waiting turn holds no worker
    assert await agent.world.take_wake(lease=1.0) is None  # and nothing polls
    kinds = [e.kind for e in await session.read()]
    assert kinds[-3:] == ["approval.requested", "tool.started", "tool.finished"]
    [pending] = await session.pending_approvals()
    assert isinstance(pending, Approval) and pending.name == "refund_order"
    assert pending.call_id == "call_0_0" and pending.input == {"id": "A"}

    await session.deny(pending.execution_id, reason="not eligible")
    await session.deny(pending.execution_id, reason="said twice")  # the same: nothing
    with pytest.raises(AlreadyDecided) as refused:
        await session.approve(pending.execution_id)
    assert refused.value.approved is False
    await until_idle(agent)
    assert await turn == "Not refunded."
    entries = await session.read()
    assert [e.kind for e in entries].count("approval.decided") == 1
    assert not [e for e in entries if e.kind == "tool.started" and e.data["name"] == "refund_order"]
    heard = read_recording(tmp_path / "model.jsonl")[-1]["messages"]
    results = {m["tool_call_id"]: m for m in heard if m["role"] == "tool"}
    assert results["call_0_0"]["is_error"] and "denied: not eligible" in results["call_0_0"]["text"]
    assert results["call_0_1"] == {**results["call_0_1"], "is_error": False, "text": "A: paid"}


async def test_unknown_calls_and_bad_arguments_are_refused_and_write_nothing(
    tmp_path: Path,
) -> None:
    agent = make([BOTH, "ok"], tmp_path)
    session = agent.session()
    with pytest.raises(UnknownCall):
        await session.approve("nothing-waits")  # an empty session
    turn = session.prompt("Refund A.")
    await turn.accepted
    await until_idle(agent)
    before = await session.read()
    lookup_xid = next(e for e in before if e.kind == "tool.started").data["execution_id"]
    for xid in ("no-such-call", lookup_xid):  # lookup never waited for a decision
        with pytest.raises(UnknownCall) as unknown:
            await session.deny(xid)
        assert isinstance(unknown.value, LookupError)
    with pytest.raises(InvalidArgument):
        await session.approve("")
    with pytest.raises(InvalidArgument):
        await session.approve(lookup_xid, note=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        await session.stop(reason=["no"])  # type: ignore[arg-type]
    assert await session.read() == before


def test_tool_options_are_checked() -> None:
    made = Tool("t", "", {"type": "object"}, lambda: None, needs_approval=True, approval_timeout=5)
    assert made.needs_approval and made.approval_timeout == 5
    assert not lookup.needs_approval and refund_order.approval_timeout is None
    for bad in (0, -1, True, "5"):
        with pytest.raises(InvalidArgument):
            tool(needs_approval=True, approval_timeout=bad)(lambda: None)  # type: ignore[arg-type]


async def test_stop_cancels_a_running_async_tool(tmp_path: Path) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @tool
    async def wait_long(ctx_note: str) -> str:
        """Takes a long time."""
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "done"

    agent = make([{"tool": "wait_long", "input": {"ctx_note": "x"}}, "unused"], tmp_path, wait_long)
    session = agent.session()
    turn = session.prompt("Go.")
    worker = asyncio.create_task(until_idle(agent))
    await asyncio.wait_for(started.wait(), 10)
    await session.stop()
    with pytest.raises(TurnStopped) as stopped:
        await asyncio.wait_for(turn, 10)
    assert isinstance(stopped.value, TurnFailed) and stopped.value.text == ""
    assert cancelled.is_set()
    await worker
    kinds = [e.kind for e in await session.read() if e.kind != "fence"]
    assert kinds[-4:] == ["tool.started", "stop.requested", "tool.interrupted", "turn.stopped"]


async def test_a_stop_between_quick_steps_is_seen_at_the_next_append(tmp_path: Path) -> None:
    """Steps quicker than the stop watcher's delay are never followed: the worker
    sees the stop when its next append shows another writer's entry, and starts
    no tool after that."""
    ticks = 0
    stop_now = asyncio.Event()

    @tool(idempotent=True)
    async def tick() -> str:
        """Quick."""
        nonlocal ticks
        ticks += 1
        if ticks == 20:
            stop_now.set()
        return "ok"

    agent = make([{"tool": "tick"}] * 200 + ["never said"], tmp_path, tick)
    session = agent.session()
    turn = session.prompt("Go.")
    worker = asyncio.create_task(until_idle(agent))
    await asyncio.wait_for(stop_now.wait(), 10)
    await session.stop()
    with pytest.raises(TurnStopped):
        await asyncio.wait_for(turn, 10)
    await worker
    kinds = [e.kind for e in await session.read()]
    after_stop = kinds[kinds.index("stop.requested") :]
    assert after_stop[-1] == "turn.stopped"
    assert after_stop.count("tool.started") <= 1, after_stop  # the one its append revealed
    assert ticks < 30


async def test_stop_before_the_turn_started_ends_it_without_a_model_call(tmp_path: Path) -> None:
    agent = make(["never said"], tmp_path)
    session = agent.session()
    turn = session.prompt("Hello?")
    await turn.accepted
    await session.stop(reason="changed my mind")
    await until_idle(agent)
    with pytest.raises(TurnStopped, match="changed my mind"):
        await turn
    kinds = [e.kind for e in await session.read()]
    assert kinds == ["prompt", "stop.requested", "fence", "turn.started", "turn.stopped"]
    assert not (tmp_path / "model.jsonl").exists()


class Overloaded:
    """A model that is always overloaded (a retryable error): the worker backs off."""

    name = "overloaded"

    def __init__(self) -> None:
        self.calls = 0
        self.third = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.calls += 1
        if self.calls == 3:
            self.third.set()
        raise ModelError("overloaded", retryable=True, status=529)
        yield  # pragma: no cover - an async generator


_real_sleep = asyncio.sleep


async def _first_backoffs_short(seconds: float, result: object = None) -> object:
    """The backoffs before the third call (0.5 s, 1 s) over at once; the rest as long."""
    return await _real_sleep(0.01 if seconds in (0.5, 1.0) else seconds, result)


async def test_stop_ends_a_turn_waiting_to_retry_the_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(asyncio, "sleep", _first_backoffs_short)
    model = Overloaded()
    agent = Agent(model, world=MemoryWorld(), model_retries=10)
    session = agent.session()
    turn = session.prompt("Hello?")
    worker = asyncio.create_task(until_idle(agent))
    await asyncio.wait_for(model.third.wait(), 10)  # backing off: at once twice, then 2 s
    await session.stop()
    with pytest.raises(TurnStopped):
        await asyncio.wait_for(turn, 10)
    await worker
    assert model.calls == 3  # not asked again after the stop
