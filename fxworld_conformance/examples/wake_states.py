"""Optional ``WakeLister``: what a world says of its pending wakes, checked against
the kit's reference model (:class:`fxworld_conformance.model.WakeModel`).

A mixin of :class:`fxworld_conformance.examples.GuaranteeTests`: each test takes
the ``world`` fixture (a fresh, set-up, empty world) and is skipped, saying so,
for a world without ``wake_state`` and ``list_wakes``. The model decides which
wakes are pending, which are leased and their attempts; the world's answers must
agree after every step, and reading them must take nothing (W11-W13 untouched).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from fxworld import WakeLease, World
from fxworld.errors import InvalidArgument, InvalidSessionId
from fxworld.protocol import WakeLister
from fxworld.types import WakeState
from fxworld_conformance.examples._support import OTHER, S, e
from fxworld_conformance.model import LATER, NOW, WakeModel

_LATER_DELAY = 3600.0
_SLACK = timedelta(seconds=60)  # clocks of client and server may differ a little


def _lister(world: World) -> WakeLister:
    if not isinstance(world, WakeLister):
        pytest.skip("world does not list its wakes (optional WakeLister)")
    return world


async def _agrees(
    world: WakeLister, model: WakeModel, leases: dict[str, WakeLease], *sids: str
) -> dict[str, WakeState]:
    """Check the world's view of ``sids`` against the model; the states by id."""
    listed = {w.session_id: w for w in await world.list_wakes()}
    assert sorted(listed) == sorted(s for s in sids if model.pending(s)), model.describe()
    now = datetime.now(UTC)
    due = model.deliverable()
    for sid in sids:
        state = await world.wake_state(sid)
        assert state == listed.get(sid), f"wake_state({sid!r}) disagrees with list_wakes"
        if state is None:
            continue
        lease = leases.get(sid)
        held = lease is not None and model.held(sid, lease.token)
        assert (state.leased_until is not None) == held, f"{state}: {model.describe()}"
        if held and lease is not None:
            assert abs(state.leased_until - lease.expires_at) < _SLACK  # type: ignore[operator]
        elif sid in due:
            assert state.due_at <= now + _SLACK, f"{state} should be due: {model.describe()}"
        else:
            assert state.due_at > now + _SLACK, f"{state} should not be due yet"
    return listed


class WakeStateExamples:
    """``wake_state`` and ``list_wakes`` (optional), against the reference model."""

    async def test_wake_states_follow_the_model(self, world: World) -> None:
        lister = _lister(world)
        model, leases = WakeModel(), dict[str, WakeLease]()
        await _agrees(lister, model, leases, S, OTHER)
        await world.append(S, [e()], wake=0)
        model.wake(S, NOW, "append")
        await world.wake(OTHER, delay=_LATER_DELAY)
        model.wake(OTHER, LATER)
        states = await _agrees(lister, model, leases, S, OTHER)
        assert states[S].attempt == 0 and states[S].leased_until is None
        lease = await world.take_wake(lease=60)  # listing took nothing: S is still due
        assert lease is not None and lease.session_id == S
        assert model.take(S, lease.token, short=False) == lease.attempt
        leases[S] = lease
        states = await _agrees(lister, model, leases, S, OTHER)
        assert states[S].attempt == lease.attempt
        await world.wake(S)  # while leased: still one wake, still leased (W11, W12)
        model.wake(S, NOW)
        await _agrees(lister, model, leases, S, OTHER)
        await world.finish_wake(lease)  # a request came since the take: S stays due (W13)
        model.finish(S)
        states = await _agrees(lister, model, leases, S, OTHER)
        assert states[S].attempt == 0
        again = await world.take_wake(lease=60)
        assert again is not None and again.session_id == S
        model.take(S, again.token, short=False)
        leases[S] = again
        await world.finish_wake(again)
        model.finish(S)
        await _agrees(lister, model, leases, S, OTHER)
        await world.delete(OTHER)
        model.delete(OTHER)
        assert await _agrees(lister, model, leases, S, OTHER) == {}

    async def test_a_lease_that_ran_out_is_not_shown_as_held(self, world: World) -> None:
        lister = _lister(world)
        model, leases = WakeModel(), dict[str, WakeLease]()
        await world.wake(S)
        model.wake(S, NOW)
        lease = await world.take_wake(lease=0.3)
        assert lease is not None
        model.take(S, lease.token, short=True)
        leases[S] = lease
        await asyncio.sleep(0.6)
        model.expire_short()
        states = await _agrees(lister, model, leases, S)
        assert states[S].attempt == 1

    async def test_list_wakes_pages_by_session_id(self, world: World) -> None:
        lister = _lister(world)
        sids = [f"w{i:02d}" for i in range(7)]
        for sid in reversed(sids):
            await world.wake(sid, delay=_LATER_DELAY)
        page1 = await lister.list_wakes(limit=3)
        page2 = await lister.list_wakes(after=page1[-1].session_id, limit=3)
        page3 = await lister.list_wakes(after=page2[-1].session_id, limit=3)
        assert [w.session_id for w in page1 + page2 + page3] == sids
        assert await world.take_wake(lease=5) is None  # none due: listing took nothing

    async def test_bad_arguments_are_refused(self, world: World) -> None:
        lister = _lister(world)
        await world.wake(S)
        with pytest.raises(InvalidSessionId):
            await lister.wake_state("not a valid id!")
        for bad in (0, -1, 1.5, "10"):
            with pytest.raises(InvalidArgument):
                await lister.list_wakes(limit=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            await lister.list_wakes(after=5)  # type: ignore[arg-type]
        assert [w.session_id for w in await lister.list_wakes()] == [S]
