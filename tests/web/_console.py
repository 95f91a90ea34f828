"""A support desk's sessions for the inspector's session-page tests: a refund tool
with durable steps (one call ran them all, one was cut by a crash mid-step), a
desk agent whose billing sub-agent waits for approval of a credit, and a large
tool result. Written by real agents on a real worker where that is cheap
(``desk_waiting``, ``refund_run``), and entry by entry, as a worker writes them,
for the crash."""

from __future__ import annotations

import asyncio
from typing import Any

from fxworld import Agent, ToolContext, open_world, tool
from fxworld.engine import child_session_id, log
from fxworld.protocol import World
from fxworld.testing import ScriptedModel
from tests.web._turns import call, finished, message, started, turn

BIG_BYTES = 3 * 1024 * 1024
"""The size of the large tool result (``s-big``)."""


@tool(needs_approval=True)
async def issue_credit(account: str, amount: float, reason: str) -> str:
    """Credit a customer's account."""
    return f"credited {amount} to {account}"


@tool(resumable=True)
async def refund_order(order: str, *, ctx: ToolContext) -> dict[str, Any]:
    """Refund an order: reserve, charge back, then email the customer."""
    hold = await ctx.step("reserve", lambda: {"hold": f"H-{order}"})
    charge = await ctx.step("charge_back", lambda: {"charge": "ch_42", "amount": 49.9})
    await ctx.step("email", lambda: {"sent": True})
    return {"order": order, **hold, **charge}


def _desk(world: World | str, script: list[Any], billing: list[Any]) -> Agent:
    sub = Agent(ScriptedModel(billing), tools=[issue_credit], name="billing")
    return Agent(
        ScriptedModel(script), tools=[sub.as_tool(name="billing"), refund_order], world=world
    )


CREDIT = {"account": "acme-7", "amount": 20.0, "reason": "late delivery, ticket T-881"}
DESK = [
    {"tool": "billing", "input": {"input": "Credit acme-7 20 EUR for the late delivery"}},
    "The credit is issued.",
]
BILLING = [{"tool": "issue_credit", "input": CREDIT}, "Credit issued: 20 EUR."]


async def desk_waiting(url: str, sid: str = "desk") -> str:
    """Session ``sid``: a desk turn that asked its billing sub-agent for a credit;
    the sub-agent's call of ``issue_credit`` waits for approval. Returns the
    child session's id."""
    world = open_world(url)
    await world.setup()
    desk = _desk(world, DESK, BILLING)
    desk.session(sid).prompt("Acme says order A-7 came late; make it right.")
    await asyncio.wait_for(desk.work(until_idle=True, poll_interval=0.02), 60)
    entries = await world.read(sid, 0)
    await world.close()
    child = next(e.data["session"] for e in entries if e.kind == log.CHILD_STARTED)
    return str(child)


async def desk_finish(url: str) -> None:
    """Run the desk's worker until nothing is due (after a decision or a stop)."""
    world = open_world(url)
    desk = _desk(world, DESK, BILLING)
    await asyncio.wait_for(desk.work(until_idle=True, poll_interval=0.02), 60)
    await world.close()


async def refund_run(url: str, sid: str = "refunds") -> None:
    """Session ``sid``, turn 1: a refund whose three durable steps all ran, by a
    real worker."""
    world = open_world(url)
    await world.setup()
    desk = _desk(world, [{"tool": "refund_order", "input": {"order": "A-1"}}, "Refunded."], [])
    desk.session(sid).prompt("Refund order A-1.")
    await asyncio.wait_for(desk.work(until_idle=True, poll_interval=0.02), 60)
    await world.close()


async def refund_cut(world: World, sid: str = "refunds") -> None:
    """Session ``sid``, turn 2: a refund whose worker died inside its
    ``charge_back`` step; run again, the call raised ``StepInterrupted`` (as the
    engine writes it): reserve finished, charge_back may have partly run, email
    was never reached."""
    c = call("r2", "refund_order", order="A-2")
    eid = c["execution_id"]
    steps = [
        log.entry(log.STEP_STARTED, execution_id=eid, step="reserve", key=f"{eid}:reserve"),
        log.entry(log.STEP_FINISHED, execution_id=eid, step="reserve", result={"hold": "H-A-2"}),
        log.entry(log.STEP_STARTED, execution_id=eid, step="charge_back", key=f"{eid}:charge_back"),
    ]
    prompt = await turn(world, sid, "Refund order A-2.", message("m9", "", c), started(c), *steps)
    fence = await world.acquire(sid)  # the worker died mid-step; another takes the turn over
    error = (
        f"StepInterrupted: step 'charge_back' (key {eid}:charge_back) was started before a crash"
        " and did not finish; it may have partly run, and is not run again."
    )
    end = [
        started(c, attempt=2),
        finished(c, error, is_error=True),
        message("m10", "The charge-back may have gone through; a person should check."),
        log.entry(log.TURN_FINISHED, prompt=prompt, turn="t", text="checking"),
    ]
    await world.append(sid, end, fence=fence)


async def big_result(world: World, sid: str = "s-big") -> None:
    """Session ``sid``: a tool that fetched a 3 MiB page."""
    c = call("b1", "fetch_page", url="https://example.com/terms")
    line = "Terms of service, section {}. The customer agrees to what follows. "
    text = "".join(line.format(n) for n in range(BIG_BYTES // 60))[:BIG_BYTES]
    p = await turn(
        world, sid, "Summarize the terms.", message("mb", "", c), started(c), finished(c, text)
    )
    await world.append(sid, [log.entry(log.TURN_FINISHED, prompt=p, turn="t", text="Done.")])


__all__ = [
    "BIG_BYTES",
    "CREDIT",
    "desk_waiting",
    "desk_finish",
    "refund_run",
    "refund_cut",
    "big_result",
    "child_session_id",
]
