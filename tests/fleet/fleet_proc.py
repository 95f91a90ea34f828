"""One process of a fleet, for tests/fleet/test_connections.py: opens the worlds at
``argv[1:]``, presses each as a busy worker would (many calls at once, followers,
wakes taken and finished), prints ``ready``, then holds its connections, idle, until
its stdin closes."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from fxworld import NewEntry, open_world

CALLS = 24
"""Calls in flight at once: more than any pool of the budget holds."""
FOLLOWED = 8
"""Sessions followed: on a Cluster, in several partitions (an ``XREAD`` each)."""


async def main(urls: list[str]) -> None:
    worlds = [open_world(url) for url in urls]
    sids = [f"p{os.getpid()}-f{i}" for i in range(FOLLOWED)]
    followers = [asyncio.create_task(_follow(w, sid)) for w in worlds for sid in sids]
    try:
        await asyncio.gather(*(press(w) for w in worlds))
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.read)
    finally:
        for task in followers:
            task.cancel()
        for w in worlds:
            await w.close()


async def press(world: Any) -> None:
    sid = f"p{os.getpid()}"
    for _ in range(3):
        await asyncio.gather(
            *(world.append(f"{sid}-{i}", [NewEntry("n", {"i": i})], wake=0) for i in range(CALLS)),
            *(world.read(f"{sid}-{i}") for i in range(CALLS)),
            world.append(sid, [NewEntry("note", {})]),
        )
        lease = await world.take_wake(lease=30)
        if lease is not None:
            await world.finish_wake(lease)


async def _follow(world: Any, sid: str) -> None:
    async for _ in world.follow(sid):
        pass


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
