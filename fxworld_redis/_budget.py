"""A world's connection budget on a Redis Cluster: calls wait for a free connection.

redis-py's asyncio ``RedisCluster`` opens up to ``max_connections`` per node and
raises ``MaxConnectionsError`` past them (it has no blocking pool). A world keeps
its budget itself instead: at most ``budget`` calls in flight at once in the
process, so no node ever sees more than ``budget`` of its connections for calls (plus
the one redis-py keeps on the node of the URL to discover the slots), and a call
past them waits its turn rather than failing.

The followers' blocking ``XREAD`` (one per partition waited on, see ``_follow``)
counts within the budget, but at most :func:`follow_share` of them run at once: the
rest of the budget is always free for appends, reads and wakes, so a full budget
cannot leave writers waiting on followers that wait on writers. Where more
partitions are waited on than that share, their ``XREAD``\\ s take turns, each
blocking :data:`TURN_MS` at most instead of the usual second.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["Budget", "follow_share", "TURN_MS"]

T = TypeVar("T")

TURN_MS = 100
"""How long one ``XREAD`` blocks while other partitions wait for their turn."""


def follow_share(budget: int) -> int:
    """How many ``XREAD`` s may hold a connection at once: half the budget (at least 1;
    a budget is at least 2, so writers always keep one)."""
    return max(1, budget // 2)


class Budget:
    """The budget's calls and ``XREAD`` s on one event loop."""

    def __init__(self, budget: int) -> None:
        self._calls = asyncio.Semaphore(budget)
        self._follows = asyncio.Semaphore(follow_share(budget))
        self._queued = 0  # XREADs waiting for their turn

    async def call(self, run: Callable[[], Awaitable[T]]) -> T:
        """``await run()`` once a connection of the budget is free."""
        async with self._calls:
            return await run()

    async def xread(self, run: Callable[[int], Awaitable[T]], block_ms: int) -> T:
        """``await run(ms)``, an ``XREAD`` blocking ``ms``, once it is its turn:
        ``block_ms``, or :data:`TURN_MS` while other ``XREAD`` s wait for theirs."""
        self._queued += 1
        try:
            await self._follows.acquire()
        finally:
            self._queued -= 1
        try:
            return await run(TURN_MS if self._queued else block_ms)
        finally:
            self._follows.release()
