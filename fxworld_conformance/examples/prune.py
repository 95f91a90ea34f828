"""The optional capabilities retention needs: ``last_entry``
(:class:`fxworld.protocol.LastEntryReader`) and ``delete_if_idle``
(:class:`fxworld.protocol.IdleDeleter`). A world without one skips its checks.

A mixin of :class:`fxworld_conformance.examples.GuaranteeTests`: each test takes
the ``world`` fixture (a fresh, set-up, empty world)."""

from __future__ import annotations

from typing import Any

import pytest

from fxworld import World
from fxworld.errors import Fenced, InvalidArgument, InvalidSessionId, LeaseLost
from fxworld.protocol import IdleDeleter, LastEntryReader, SessionLister
from fxworld_conformance.examples._support import OTHER, S, all_entries, e, no_wake, view


def _deleter(world: World) -> Any:
    if not isinstance(world, IdleDeleter):
        pytest.skip("world has no delete_if_idle (fxworld.protocol.IdleDeleter)")
    return world


class PruneExamples:
    """``last_entry`` and ``delete_if_idle``."""

    secrets: tuple[str, ...] = ()

    async def test_last_entry_is_the_end_of_the_log(self, world: World) -> None:
        if not isinstance(world, LastEntryReader):
            pytest.skip("world has no last_entry (fxworld.protocol.LastEntryReader)")
        assert await world.last_entry(S) is None
        f = await world.acquire(S)
        await world.append(S, [e(n=1), e(n=2)], fence=f)
        last = await world.last_entry(S)
        assert last is not None and view([last]) == view((await all_entries(world, S))[-1:])
        assert last.seq == 3 and last.data == {"n": 2} and last.epoch == f.epoch
        assert last.at == (await world.read(S, 2))[0].at
        await world.delete(S)
        assert await world.last_entry(S) is None
        with pytest.raises(InvalidSessionId):
            await world.last_entry("bad id")

    async def test_delete_if_idle_deletes_an_idle_session_whole(self, world: World) -> None:
        deleter = _deleter(world)
        f = await world.acquire(S)
        await world.append(S, [e(n=1)], fence=f, key="k")
        await world.append(OTHER, [e(n=1)])
        assert await deleter.delete_if_idle(S, last=2) is True
        assert await world.read(S) == []
        with pytest.raises(Fenced):  # W14: old fences are refused
            await world.append(S, [e()], fence=f)
        assert await world.append(S, [e(n=2)], key="k") == 1  # the key went too
        assert [x.data for x in await world.read(OTHER)] == [{"n": 1}]
        if isinstance(world, SessionLister):
            assert await world.list_sessions() == [S, OTHER]
            assert await deleter.delete_if_idle(S, last=1) is True
            assert await world.list_sessions() == [OTHER]
        assert await deleter.delete_if_idle("never-written", last=1) is False

    async def test_delete_if_idle_refuses_when_an_append_came_since(self, world: World) -> None:
        deleter = _deleter(world)
        await world.append(S, [e(n=1)])
        looked = 1  # "idle since seq 1" ... then a prompt arrives before the delete
        await world.append(S, [e("prompt", text="still there?")])
        assert await deleter.delete_if_idle(S, last=looked) is False
        assert [x.data for x in await world.read(S)] == [{"n": 1}, {"text": "still there?"}]
        await world.acquire(S)  # a takeover is an append too
        assert await deleter.delete_if_idle(S, last=2) is False
        assert len(await world.read(S)) == 3

    async def test_delete_if_idle_keeps_a_session_with_a_pending_wake(self, world: World) -> None:
        deleter = _deleter(world)
        await world.append(S, [e(n=1)], wake=3600)  # due in an hour: pending all the same
        assert await deleter.delete_if_idle(S, last=1) is False
        await world.append(OTHER, [e(n=1)])
        await world.wake(OTHER)
        lease = await world.take_wake(lease=30)
        assert lease is not None and lease.session_id == OTHER
        assert await deleter.delete_if_idle(OTHER, last=1) is False  # leased: running
        await world.finish_wake(lease)
        assert await deleter.delete_if_idle(OTHER, last=1) is True
        with pytest.raises(LeaseLost):
            await world.finish_wake(lease)
        assert [x.data for x in await world.read(S)] == [{"n": 1}]
        await no_wake(world)  # S's wake is not due yet, and OTHER's went with it

    async def test_delete_if_idle_refuses_bad_input_before_any_io(self, world: World) -> None:
        deleter = _deleter(world)
        await world.append(S, [e(n=1)])
        for bad in [0, -1, 1.0, "1", True, None, 2**64]:
            with pytest.raises(InvalidArgument):
                await deleter.delete_if_idle(S, last=bad)
        with pytest.raises(InvalidSessionId):
            await deleter.delete_if_idle("bad id", last=1)
        assert [x.data for x in await world.read(S)] == [{"n": 1}]
