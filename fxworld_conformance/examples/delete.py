"""W14: delete; and the optional session listing.

A mixin of :class:`fxworld_conformance.examples.AsyncExamples`: each test takes
the ``world`` fixture (a fresh, set-up, empty world)."""

from __future__ import annotations

import pytest

from fxworld import World
from fxworld.errors import (
    Fenced,
    LeaseLost,
)
from fxworld.protocol import SessionLister
from fxworld_conformance.examples._support import (
    OTHER,
    S,
    e,
    no_wake,
)


class DeleteExamples:
    """W14."""

    secrets: tuple[str, ...] = ()

    # -- W14 delete ----------------------------------------------------------------

    async def test_W14_delete_removes_log_keys_and_wake(self, world: World) -> None:
        f = await world.acquire(S)
        await world.append(S, [e(n=1)], fence=f, key="k", wake=0)
        await world.append(OTHER, [e(n=1)])
        await world.delete(S)
        assert await world.read(S) == []
        await no_wake(world)
        # The key is gone: the same key appends anew, from seq 1.
        assert await world.append(S, [e(n=2)], key="k") == 1
        assert [x.data for x in await world.read(S)] == [{"n": 2}]
        # Another session is untouched.
        assert [x.data for x in await world.read(OTHER)] == [{"n": 1}]

    async def test_W14_old_fences_are_refused_after_delete(self, world: World) -> None:
        f = await world.acquire(S)
        await world.delete(S)
        with pytest.raises(Fenced):
            await world.append(S, [e()], fence=f)
        assert await world.read(S) == []
        f2 = await world.acquire(S)
        assert f2.epoch > f.epoch and f2.seq == 1
        with pytest.raises(Fenced):
            await world.append(S, [e()], fence=f)
        assert await world.append(S, [e()], fence=f2) == 2

    async def test_W14_delete_of_a_leased_wake_and_unknown_session(self, world: World) -> None:
        await world.delete("never-written")
        await world.wake(S)
        lease = await world.take_wake(lease=5)
        assert lease is not None
        await world.delete(S)
        with pytest.raises(LeaseLost):
            await world.finish_wake(lease)
        await no_wake(world)

    async def test_W14_deleted_session_leaves_the_listing(self, world: World) -> None:
        if not isinstance(world, SessionLister):
            pytest.skip("world does not list sessions")
        await world.append(S, [e()])
        await world.append(OTHER, [e()])
        assert await world.list_sessions() == [S, OTHER]
        await world.delete(S)
        assert await world.list_sessions() == [OTHER]

    # -- optional: listing ---------------------------------------------------------

    async def test_list_sessions_pages_in_ascending_order(self, world: World) -> None:
        if not isinstance(world, SessionLister):
            pytest.skip("world does not list sessions")
        ids = ["b", "a", "c:1", "A", "z-9", "m.x"]
        for sid in ids:
            await world.append(sid, [e()])
        await world.acquire("fenced-only")
        await world.append("gone", [e()])
        await world.delete("gone")
        expected = sorted([*ids, "fenced-only"])
        assert await world.list_sessions() == expected
        page1 = await world.list_sessions(limit=3)
        page2 = await world.list_sessions(after=page1[-1], limit=3)
        page3 = await world.list_sessions(after=page2[-1], limit=3)
        assert page1 + page2 + page3 == expected
        assert await world.list_sessions(after=expected[-1]) == []
