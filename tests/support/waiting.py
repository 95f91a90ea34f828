"""Wait on a condition with a bound, instead of sleeping a fixed time."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


async def wait_until(predicate: Callable[[], bool], limit: float, every: float = 0.02) -> None:
    """Return once ``predicate()`` is true; fail after ``limit`` seconds. Polls: the
    condition is kept by another process or by real time, so no event can say it."""
    async with asyncio.timeout(limit):
        while not predicate():  # noqa: ASYNC110 (see the docstring)
            await asyncio.sleep(every)


async def wait_until_async(
    predicate: Callable[[], Awaitable[bool]], limit: float, every: float = 0.05
) -> None:
    """:func:`wait_until` for a condition that must be awaited (e.g. read from a world)."""
    async with asyncio.timeout(limit):
        while not await predicate():  # noqa: ASYNC110 (see wait_until)
            await asyncio.sleep(every)
