"""Optional ``WakeLister``: what a world says of its pending wakes, checked against
the kit's reference model (:class:`fxworld_conformance.model.WakeModel`).

Each scenario needs ``wake_state`` and ``list_wakes`` and is skipped, saying so,
for a world without them. The model decides which
wakes are pending, which are leased and their attempts; the world's answers must
agree after every step, and reading them must take nothing (W11-W13 untouched).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import cast

from fxworld import WakeLease
from fxworld.errors import InvalidArgument, InvalidSessionId
from fxworld.protocol import WakeLister
from fxworld.types import WakeState
from fxworld_conformance.guarantees.probe import OTHER, Probe, S, check, e, no_wake
from fxworld_conformance.guarantees.scenario import Group
from fxworld_conformance.model import LATER, NOW, WakeModel

__all__ = ["SCENARIOS"]

SCENARIOS = Group()

_LATER_DELAY = 3600.0
_SLACK = timedelta(seconds=60)  # clocks of client and server may differ a little


async def agrees(
    world: WakeLister, g: str, model: WakeModel, leases: dict[str, WakeLease], *sids: str
) -> dict[str, WakeState]:
    """Check the world's view of ``sids`` against the model after a step of
    guarantee ``g`` (a disagreement breaks it); the states by id."""
    listed = {w.session_id: w for w in await world.list_wakes()}
    pending = sorted(s for s in sids if model.pending(s))
    check(sorted(listed) == pending, g, f"list_wakes shows {sorted(listed)}: {model.describe()}")
    now = datetime.now(UTC)
    due = model.deliverable()
    for sid in sids:
        state = await world.wake_state(sid)
        check(state == listed.get(sid), g, f"wake_state({sid!r}) disagrees with list_wakes")
        if state is None:
            continue
        lease = leases.get(sid)
        held = lease is not None and model.held(sid, lease.token)
        check((state.leased_until is not None) == held, g, f"{state}: {model.describe()}")
        if held and lease is not None:
            assert abs(state.leased_until - lease.expires_at) < _SLACK  # type: ignore[operator]
        elif sid in due:
            check(state.due_at <= now + _SLACK, g, f"{state} should be due: {model.describe()}")
        else:
            check(state.due_at > now + _SLACK, g, f"{state} should not be due yet")
    return listed


@SCENARIOS(
    "wake states follow the model; listing takes nothing", also=("W11", "W13"), needs=(WakeLister,)
)
async def w12_wake_states_follow_the_model(p: Probe) -> None:
    world = p.world
    lister = cast(WakeLister, world)
    model, leases = WakeModel(), dict[str, WakeLease]()
    await agrees(lister, "W12", model, leases, S, OTHER)
    await world.append(S, [e()], wake=0)
    model.wake(S, NOW, "append")
    await agrees(lister, "W7", model, leases, S, OTHER)
    await world.wake(OTHER, delay=_LATER_DELAY)
    model.wake(OTHER, LATER)
    states = await agrees(lister, "W11", model, leases, S, OTHER)
    assert states[S].attempt == 0 and states[S].leased_until is None
    lease = await world.take_wake(lease=60)  # listing took nothing: S is still due
    assert lease is not None and lease.session_id == S
    assert model.take(S, lease.token, short=False) == lease.attempt
    leases[S] = lease
    states = await agrees(lister, "W12", model, leases, S, OTHER)
    assert states[S].attempt == lease.attempt
    await world.wake(S)  # while leased: still one wake, still leased (W11, W12)
    model.wake(S, NOW)
    await agrees(lister, "W11", model, leases, S, OTHER)
    await world.finish_wake(lease)  # a request came since the take: S stays due (W13)
    model.finish(S)
    states = await agrees(lister, "W13", model, leases, S, OTHER)
    assert states[S].attempt == 0
    again = await world.take_wake(lease=60)
    assert again is not None and again.session_id == S
    model.take(S, again.token, short=False)
    leases[S] = again
    await world.finish_wake(again)
    model.finish(S)
    await agrees(lister, "W13", model, leases, S, OTHER)
    await world.delete(OTHER)
    model.delete(OTHER)
    assert await agrees(lister, "W14", model, leases, S, OTHER) == {}


@SCENARIOS("a lease that ran out is not shown as held", needs=(WakeLister,))
async def w12_wake_state_of_a_lease_that_ran_out(p: Probe) -> None:
    world = p.world
    lister = cast(WakeLister, world)
    model, leases = WakeModel(), dict[str, WakeLease]()
    await world.wake(S)
    model.wake(S, NOW)
    lease = await world.take_wake(lease=0.3)
    assert lease is not None
    model.take(S, lease.token, short=True)
    leases[S] = lease
    await asyncio.sleep(0.6)
    model.expire_short()
    states = await agrees(lister, "W12", model, leases, S)
    assert states[S].attempt == 1


@SCENARIOS("list_wakes pages by session id", needs=(WakeLister,))
async def w12_list_wakes_pages(p: Probe) -> None:
    world = p.world
    lister = cast(WakeLister, world)
    sids = [f"w{i:02d}" for i in range(7)]
    for sid in reversed(sids):
        await world.wake(sid, delay=_LATER_DELAY)
    page1 = await lister.list_wakes(limit=3)
    page2 = await lister.list_wakes(after=page1[-1].session_id, limit=3)
    page3 = await lister.list_wakes(after=page2[-1].session_id, limit=3)
    assert [w.session_id for w in page1 + page2 + page3] == sids
    await no_wake(p, "W11")  # none due, and listing took nothing


@SCENARIOS("wake_state and list_wakes refuse bad arguments", needs=(WakeLister,))
async def w15_wake_lister_bad_arguments(p: Probe) -> None:
    world = p.world
    lister = cast(WakeLister, world)
    await world.wake(S)
    await p.expect_error(InvalidSessionId, "wake_state(bad id)", lister.wake_state("a b"))
    for bad in (0, -1, 1.5, "10"):
        await p.expect_error(
            InvalidArgument,
            f"list_wakes(limit={bad!r})",
            lister.list_wakes(limit=bad),  # type: ignore[arg-type]
        )
    await p.expect_error(InvalidArgument, "list_wakes(after=5)", lister.list_wakes(after=5))  # type: ignore[arg-type]
    assert [w.session_id for w in await lister.list_wakes()] == [S]
