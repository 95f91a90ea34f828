"""``agent.work()`` says how each session it ran ended (``WorkResult.ended``):
done, waiting (for a person or a child), yielded (its wake pushed) or pending."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fxworld import Agent, MemoryWorld, tool
from fxworld.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)


class Recorder:
    """A push that records what it was asked to send (or fails, when told)."""

    def __init__(self, fail: bool = False) -> None:
        self.sent: list[str] = []
        self.fail = fail

    async def push(self, session_id: str, *, delay: float = 0.0) -> None:
        if self.fail:
            raise ConnectionError("the queue is down")
        self.sent.append(session_id)

    async def close(self) -> None:
        pass


@tool(idempotent=True)
async def slow_step(n: int) -> str:
    """Takes 0.4 s."""
    await asyncio.sleep(0.4)
    return f"step {n} done"


@tool(needs_approval=True)
def refund(id: str) -> str:
    """Needs a person."""
    return f"refunded {id}"


TWO_STEPS: list[Any] = [{"tool": "slow_step", "input": {"n": n}} for n in (1, 2)] + ["Done."]


async def test_a_finished_turn_and_a_parked_one_end_done_and_waiting() -> None:
    hello = Agent(ScriptedModel(["Hello."]), world=MemoryWorld())
    done = (await hello.session().create("Hi")).session_id
    assert (await hello.work(until_idle=True)).ended == {done: "done"}
    assert (await hello.work(until_idle=True)).ended == {}  # nothing was due: nothing ran
    script: list[Any] = [{"tool": "refund", "input": {"id": "A-1"}}]
    parked = Agent(ScriptedModel(script), tools=[refund], world=MemoryWorld())
    waits = (await parked.session().create("refund A-1")).session_id
    worked = await parked.work(until_idle=True)
    assert worked.ended == {waits: "waiting"} and not worked.hit_deadline


async def test_a_yield_ends_yielded_when_pushed_and_pending_otherwise() -> None:
    pushed = Agent(
        ScriptedModel(TWO_STEPS), tools=[slow_step], world=MemoryWorld(), push=Recorder()
    )
    sid = (await pushed.session().create("Go")).session_id
    worked = await pushed.work(until_idle=True, deadline=0.6)
    assert worked.hit_deadline and worked.ended == {sid: "yielded"}

    unpushed = Agent(ScriptedModel(TWO_STEPS), tools=[slow_step], world=MemoryWorld())
    sid = (await unpushed.session().create("Go")).session_id
    worked = await unpushed.work(until_idle=True, deadline=0.6)
    assert worked.hit_deadline and worked.ended == {sid: "pending"}  # nothing sent a message

    down = Recorder(fail=True)
    failed = Agent(ScriptedModel(TWO_STEPS), tools=[slow_step], world=MemoryWorld(), push=down)
    sid = (await failed.session().create("Go")).session_id
    worked = await failed.work(until_idle=True, deadline=0.6)
    assert worked.ended == {sid: "pending"}  # its push failed: the delivery is kept

    worked = await pushed.work(until_idle=True)  # the next invocation finishes the turn
    assert list(worked.ended.values()) == ["done"]
