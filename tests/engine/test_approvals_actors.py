"""Accountable decisions (issue 47 item 3), in one process on MemoryWorld: an
approval, a denial and a stop record who asked for them (``actor``: ``"local"``
when the caller names no one) and what they said (``note``; a denial's reason is
also its ``reason``, which older readers and the conversation use); a bad actor is
refused before anything is written."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fxworld import Agent, MemoryWorld, tool
from fxworld.engine import log
from fxworld.errors import InvalidArgument
from fxworld.testing import ScriptedModel, read_recording

pytestmark = pytest.mark.timeout(60)


@tool(needs_approval=True)
def refund_order(id: str) -> str:
    """Refund an order."""
    return f"refunded {id}"


REFUND = {"tool": "refund_order", "input": {"id": "A"}}


async def parked(agent: Agent, sid: str) -> str:
    """Session ``sid`` with a turn waiting on a refund: the call's execution id."""
    await agent.session(sid).prompt("Refund A.").accepted
    await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)
    [waiting] = await agent.session(sid).pending_approvals()
    return waiting.execution_id


def decided(entries: list[object]) -> dict[str, object]:
    [d] = [e.data for e in entries if e.kind == log.APPROVAL_DECIDED]  # type: ignore[attr-defined]
    return dict(d)


def make(tmp_path: Path | None = None, *replies: object) -> Agent:
    record = None if tmp_path is None else tmp_path / "model.jsonl"
    model = ScriptedModel([REFUND, *replies], record_to=record)  # type: ignore[list-item]
    return Agent(model, tools=[refund_order], world=MemoryWorld())


async def test_approve_deny_and_stop_record_actor_and_note(tmp_path: Path) -> None:
    agent = make(None, "Refunded.")
    yes = await parked(agent, "yes")
    await agent.session("yes").approve(yes, note="customer is eligible", actor="alice@example.com")
    assert decided(await agent.session("yes").read()) == {
        "v": 2,
        "execution_id": yes,
        "approved": True,
        "actor": "alice@example.com",
        "note": "customer is eligible",
    }

    agent = make(tmp_path, "Not refunded.")
    no = await parked(agent, "no")
    await agent.session("no").deny(no, reason="refunded twice already")  # no actor: "local"
    assert decided(await agent.session("no").read()) == {
        "v": 2,
        "execution_id": no,
        "approved": False,
        "actor": "local",
        "reason": "refunded twice already",
        "note": "refunded twice already",
    }
    await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)
    heard = read_recording(tmp_path / "model.jsonl")[-1]["messages"]
    [denial] = [m for m in heard if m["role"] == "tool"]
    assert denial["is_error"] and "denied: refunded twice already" in denial["text"]

    agent = make(None, "-")
    await parked(agent, "stopped")
    await agent.session("stopped").stop("wrong customer", actor="bob")
    [stop] = [e.data for e in await agent.session("stopped").read() if e.kind == "stop.requested"]
    assert stop == {"v": 2, "prompt": 1, "reason": "wrong customer", "actor": "bob"}
    await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)
    assert (await agent.session("stopped").read())[-1].kind == log.TURN_STOPPED


@pytest.mark.parametrize(
    "actor",
    ["", "   ", "x" * 201, "alice\nforged line", 3, b"alice"],
    ids=["empty", "blank", "201-chars", "newline", "int", "bytes"],
)
async def test_a_bad_actor_is_refused_before_anything_is_written(actor: object) -> None:
    agent = make(None, "-")
    xid = await parked(agent, "s")
    session = agent.session("s")
    before = await session.read()
    for act in (
        session.approve(xid, note="ok", actor=actor),  # type: ignore[arg-type]
        session.deny(xid, reason="no", actor=actor),  # type: ignore[arg-type]
        session.stop("enough", actor=actor),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidArgument, match="actor"):
            await act
    assert await session.read() == before
    await session.approve(xid, actor="x" * 200)  # the longest actor
    assert decided(await session.read())["actor"] == "x" * 200
