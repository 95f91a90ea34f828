"""Following a log: a polling ``follow()`` built on ``read()``, for backends with
no push (W10), and :func:`bounded_follow`, which the engine's streams use so that
a consumer that stops reading pins one small page, not a backend's whole page.

A backend with a cheap change signal passes ``changed`` to :func:`poll_follow`: an
awaitable that returns when the log may have grown (or after a timeout), so it
polls only its signal.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from fxworld.types import Entry

if TYPE_CHECKING:
    from fxworld.protocol import World

__all__ = ["poll_follow", "bounded_follow", "PAGE_BYTES", "PAGE_ENTRIES"]


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


PAGE_BYTES = 1 << 20
"""The most a :func:`bounded_follow` page holds, in bytes of entry data (JSON), as
long as one entry is smaller: a page always holds at least one entry."""

PAGE_ENTRIES = 256
"""The most entries a :func:`bounded_follow` page holds."""

_FIRST_PAGE = 4  # entries: the first read knows nothing of their size yet


async def bounded_follow(
    world: World,
    session_id: str,
    after: int,
    *,
    page_bytes: int = PAGE_BYTES,
    page_entries: int = PAGE_ENTRIES,
) -> AsyncIterator[Entry]:
    """What ``world.follow(session_id, after)`` yields, holding at most one page of
    about ``page_bytes`` (or one entry) while the consumer does not pull.

    The backlog is read in pages whose entry limit shrinks to fit ``page_bytes``
    after the largest entry seen; an entry is let go of as soon as it is yielded.
    Once caught up it waits on ``world.follow`` for the next entry, and checks
    with a one-entry read whether more came with it: if so, the follower (and the
    page it read) is closed before anything is yielded, and reading goes on in
    bounded pages. So a consumer that stops pulling pins at most one page.
    """
    cursor = after
    limit = min(_FIRST_PAGE, page_entries)
    while True:
        page = deque(await world.read(session_id, cursor, limit=limit))
        if page:
            largest = max(len(json.dumps(e.data)) for e in page)
            limit = max(1, min(page_entries, page_bytes // max(largest, 1)))
            while page:
                entry = page.popleft()
                cursor = entry.seq
                yield entry
            continue
        follower = world.follow(session_id, cursor)
        try:
            while True:
                entry = await anext(follower)
                cursor = entry.seq
                if await world.read(session_id, cursor, limit=1):
                    break  # more is waiting: read it in bounded pages
                yield entry  # the follower holds nothing beyond this entry
        finally:
            aclose = getattr(follower, "aclose", None)
            if aclose is not None:
                await aclose()
        yield entry
