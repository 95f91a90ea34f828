"""W10: follow, reconnects, concurrent writers.

A mixin of :class:`fxworld_conformance.examples.AsyncExamples`: each test takes
the ``world`` fixture (a fresh, set-up, empty world)."""

from __future__ import annotations

import asyncio

from fxworld import World
from fxworld_conformance.examples._support import (
    LIVE,
    S,
    e,
)


class FollowExamples:
    """W10."""

    secrets: tuple[str, ...] = ()

    # -- W10 follow ----------------------------------------------------------------

    async def test_W10_follow_yields_the_past_then_new_entries_in_order_once(
        self, world: World
    ) -> None:
        await world.append(S, [e(n=1), e(n=2)])
        it = world.follow(S)
        got = [await asyncio.wait_for(anext(it), LIVE) for _ in range(2)]
        assert [x.data["n"] for x in got] == [1, 2]
        nxt = asyncio.ensure_future(asyncio.wait_for(anext(it), LIVE))
        await asyncio.sleep(0.05)
        assert not nxt.done()  # nothing new yet: follow waits
        await world.append(S, [e(n=3), e(n=4)])
        got.append(await nxt)
        got.append(await asyncio.wait_for(anext(it), LIVE))
        assert [x.seq for x in got] == [1, 2, 3, 4]
        await it.aclose()  # type: ignore[attr-defined]

    async def test_W10_reconnecting_from_the_last_seq_has_no_gap_or_duplicate(
        self, world: World
    ) -> None:
        await world.append(S, [e(n=i) for i in range(1, 6)])
        seen: list[int] = []
        for _ in range(3):
            it = world.follow(S, seen[-1] if seen else 0)
            seen.append((await asyncio.wait_for(anext(it), LIVE)).seq)
            seen.append((await asyncio.wait_for(anext(it), LIVE)).seq)
            await it.aclose()  # type: ignore[attr-defined]
            await world.append(S, [e()])
        assert seen == [1, 2, 3, 4, 5, 6]

    async def test_W10_follow_sees_concurrent_writers_without_gaps(self, world: World) -> None:
        async def writer(w: int) -> None:
            for i in range(10):
                await world.append(S, [e(w=w, i=i), e(w=w, i=i)])
                await asyncio.sleep(0.001)

        async def follower() -> list[int]:
            seqs: list[int] = []
            async for entry in world.follow(S):
                seqs.append(entry.seq)
                if len(seqs) == 60:
                    break
            return seqs

        task = asyncio.ensure_future(asyncio.wait_for(follower(), 30))
        await asyncio.gather(*(writer(w) for w in range(3)))
        assert await task == list(range(1, 61))
