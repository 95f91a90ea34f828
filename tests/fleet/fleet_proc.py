"""A fleet of processes, for tests/fleet/test_connections.py: ``fleet_proc.py N URL...``
imports the worlds' code once, then forks ``N`` processes. Each opens the worlds at
the URLs, presses each as a busy worker would (many calls at once, followers, wakes
taken and finished), prints ``ready <pid>``, then holds its connections, idle, until
its stdin closes. Forking after the imports spares each process the seconds of CPU
that importing SQLAlchemy, asyncpg and redis-py costs (50 times over on a 2-core
machine); each child is still its own OS process with its own pools and connections.
The parent exits once every child has, non-zero if any failed."""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
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
        print(f"ready {os.getpid()}", flush=True)
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


def _child(urls: list[str]) -> int:
    try:
        asyncio.run(main(urls))
        return 0
    except BaseException:
        print(f"process {os.getpid()} failed:\n{traceback.format_exc()}", flush=True)
        return 1
    finally:
        sys.stdout.flush()


def fleet(n: int, urls: list[str]) -> int:
    for url in urls:  # import each world's code here, once, not in every child
        open_world(url)
    children = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os._exit(_child(urls))  # no parent's cleanup in a child
        children.append(pid)
    failed = 0
    for pid in children:
        _, status = os.waitpid(pid, 0)
        failed += os.waitstatus_to_exitcode(status) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(fleet(int(sys.argv[1]), sys.argv[2:]))
