"""A polling ``follow()`` built on ``read()``, for backends with no push (W10).

A backend with a cheap change signal passes ``changed``: an awaitable that returns
when the log may have grown (or after a timeout), so it polls only its signal.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

from fxworld.types import Entry

__all__ = ["poll_follow"]


async def poll_follow(
    read: Callable[[str, int], Awaitable[list[Entry]]],
    session_id: str,
    after: int,
    *,
    interval: float = 0.05,
    changed: Callable[[], Awaitable[None]] | None = None,
) -> AsyncIterator[Entry]:
    """Yield every entry after ``after`` in order, once, then new ones as they land.

    ``read(session_id, after)`` must return a contiguous slice (W9), so following
    the last seq yielded can neither skip nor repeat an entry. A log that restarts
    at seq 1 after a ``delete`` is not followed past its old cursor.
    """
    cursor = after
    while True:
        batch = await read(session_id, cursor)
        for entry in batch:
            cursor = entry.seq
            yield entry
        if batch:
            continue
        if changed is None:
            await asyncio.sleep(interval)
        else:
            await changed()
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # ``changed`` swallowed a cancel (asyncio.wait_for does on Python 3.11
                # when the signal fires at the same moment): honour it, or the
                # follower would never stop.
                raise asyncio.CancelledError
