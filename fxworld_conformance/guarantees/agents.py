"""Scenarios of agent routing (W19), for a world with the optional
:class:`~fxworld.protocol.AgentRouter`: each session's owner is recorded once, and
an agent's take hands out only its own wakes and nobody's, finding them however
many wakes of other agents are due before them.

A world without the seam is skipped, saying so (as W17 skips what a world does not
promise): what it gets instead is :func:`fxworld.wakes.take_wakes_fallback`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fxworld.errors import InvalidArgument, InvalidSessionId
from fxworld.protocol import AgentRouter
from fxworld.types import WakeLease
from fxworld_conformance.guarantees.probe import OTHER, Probe, S, check, e
from fxworld_conformance.guarantees.scenario import Group

__all__ = ["SCENARIOS", "CROWD"]

SCENARIOS = Group()

CROWD = 25
"""Due wakes of another agent put before an agent's one in the starvation check."""


def _router(p: Probe) -> Any:
    return p.world  # an AgentRouter: the scenarios need it


async def _take_for(p: Probe, agent: str, limit: int = 10) -> list[WakeLease]:
    what = f"take_wakes_for({agent!r}, limit={limit})"
    got: list[WakeLease] = await p.call(
        what, _router(p).take_wakes_for(agent, lease=120.0, limit=limit)
    )
    return got


async def _woken(p: Probe, sid: str) -> None:
    """An entry and a wake of ``sid``: two calls, so a world that loses an append's
    wake (W7) fails its own guarantee here, not W19."""
    await p.append(sid, [e()])
    await p.wake(sid)


async def _claim(p: Probe, sid: str, agent: str) -> str:
    owner: str = await p.call(f"claim({sid!r}, {agent!r})", _router(p).claim(sid, agent))
    return owner


@SCENARIOS(
    "claim records a session's owner once, atomically; owner() reads it",
    also=("W15",),
    needs=(AgentRouter,),
)
async def w19_claim_once(p: Probe) -> None:
    w = _router(p)
    check(await p.call("owner", w.owner(S)) is None, "W19", "a new session has an owner")
    got = await _claim(p, S, "support")
    check(got == "support", "W19", f"the first claim of {S!r} returned {got!r}")
    again = await _claim(p, S, "sales")
    check(again == "support", "W19", f"a second claim by another agent returned {again!r}")
    owner = await p.call("owner", w.owner(S))
    check(owner == "support", "W19", f"owner({S!r}) is {owner!r} after claims")
    names = [f"agent-{i}" for i in range(6)]  # racing claims of one new session: one wins
    raced = await asyncio.gather(*(_claim(p, OTHER, n) for n in names))
    check(
        len(set(raced)) == 1 and raced[0] in names,
        "W19",
        f"six racing claims of one session returned {sorted(set(raced))}",
    )
    await p.expect_error(InvalidSessionId, "claim(bad id)", w.claim("a/b", "x"), "W15")
    await p.expect_error(InvalidArgument, "claim(bad agent)", w.claim(S, "no spaces"), "W15")
    await p.expect_error(
        InvalidArgument, "take_wakes_for(bad agent)", w.take_wakes_for("", lease=5), "W15"
    )


@SCENARIOS(
    "an agent takes its own wakes and nobody's, never another agent's",
    also=("W12",),
    needs=(AgentRouter,),
)
async def w19_only_own_wakes(p: Probe) -> None:
    await _claim(p, "a1", "support")
    await _claim(p, "b1", "sales")
    await _woken(p, "a1")
    await _woken(p, "b1")
    await _woken(p, "n1")  # nobody's: written before owners were recorded
    await _claim(p, "a2", "support")  # claimed after its wake was made
    await p.wake("a2")
    await _claim(p, "b2", "sales")
    await p.wake("b2")
    taken = await _take_for(p, "support")
    got = {t.session_id: t.agent for t in taken}
    check(
        "b1" not in got and "b2" not in got,
        "W19",
        f"the agent 'support' was handed the agent 'sales' wakes: {sorted(got)}",
    )
    check(
        got == {"a1": "support", "a2": "support", "n1": None},
        "W19",
        f"'support' should take a1, a2 (owner 'support') and n1 (no owner); got {got}",
    )
    theirs = {t.session_id: t.agent for t in await _take_for(p, "sales")}
    check(theirs == {"b1": "sales", "b2": "sales"}, "W19", f"'sales' took {theirs}")
    check(await _take_for(p, "support") == [], "W12", "a leased wake was handed out again")
    for t in taken:
        await p.finish(t)


@SCENARIOS(
    f"an agent's due wake is found behind {CROWD} due wakes of another agent",
    needs=(AgentRouter,),
)
async def w19_no_starvation(p: Probe) -> None:
    crowd = [f"b{i}" for i in range(CROWD)]
    for sid in crowd:
        await _claim(p, sid, "busy")
        await _woken(p, sid)
    await asyncio.sleep(0.01)  # the crowd is due before it
    await _claim(p, S, "quiet")
    await _woken(p, S)
    found: list[WakeLease] = []
    for _ in range(3):  # a partitioned world may answer short; three looks are plenty
        found = await _take_for(p, "quiet", limit=1)
        if found:
            break
    check(
        [t.session_id for t in found] == [S],
        "W19",
        f"the agent 'quiet' found {[t.session_id for t in found]} with {CROWD} wakes of "
        "the agent 'busy' due before its own: starved",
    )
    busy = [t.session_id for t in await _take_for(p, "busy", limit=CROWD)]
    check(
        bool(busy) and set(busy) <= set(crowd),
        "W19",
        f"the agent 'busy' took {sorted(busy)[:5]}... of its {CROWD} due wakes",
    )


@SCENARIOS(
    "delete forgets the owner: the session is claimed afresh", also=("W14",), needs=(AgentRouter,)
)
async def w19_delete_forgets_owner(p: Probe) -> None:
    w = _router(p)
    await _claim(p, S, "support")
    await _woken(p, S)
    await p.delete(S)
    owner = await p.call("owner", w.owner(S))
    check(owner is None, "W14", f"after delete, owner({S!r}) is still {owner!r}")
    got = await _claim(p, S, "sales")
    check(got == "sales", "W14", f"a deleted session's new claim returned {got!r}")
