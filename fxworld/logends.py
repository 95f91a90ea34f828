"""A session's log read from its end, and in bounded pages: the one way every part of
fxworld finds where a log ends and reads a stretch of it.

The World protocol reads forwards from a cursor (W9). What the engine (a latest
turn, retention), the web (the inspector's pages), the integrations (LangGraph's
latest checkpoint, the Agents SDK's last items) and the queue consumers need is
the end of a log, and the entries just before it. Here:

- :func:`last_entry` and :func:`last_seq`: the end. One request on a world that
  gives its last entry (:class:`~fxworld.protocol.LastEntryReader`: memory, SQLite,
  PostgreSQL, Redis, S3, and ``EncryptedWorld`` over any of them); else about
  ``2 log2(n)`` one-entry reads (gallop, then bisect: positions are dense, W4, W9).
- :func:`window`: the entries between two seqs (a world may answer a read in parts).
- :func:`backwards`: the log newest first, one page at a time, pages growing from
  :data:`FIRST_PAGE` to :data:`LAST_PAGE` entries: the cost is that of the entries
  read, never of the whole log.
- :func:`pages`: a stretch read forwards in pages of about
  :data:`~fxworld.follow.PAGE_BYTES`, sized by the largest entry seen so far.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from fxworld.follow import PAGE_BYTES, PAGE_ENTRIES
from fxworld.protocol import LastEntryReader, World
from fxworld.types import Entry

__all__ = [
    "FIRST_PAGE",
    "LAST_PAGE",
    "last_entry",
    "last_seq",
    "window",
    "backwards",
    "pages",
    "fit",
]

FIRST_PAGE = 8
"""Entries in the first page read backwards: a latest checkpoint and its writes, or
the last few items, fit in it."""

LAST_PAGE = 256
"""The most entries one backwards page asks for."""


async def last_entry(world: World, sid: str) -> Entry | None:
    """The entry with the greatest seq, or ``None`` for an empty log."""
    if isinstance(world, LastEntryReader):
        return await world.last_entry(sid)
    last = await _bisected_end(world, sid)
    found = await world.read(sid, last - 1, limit=1) if last else []
    return found[0] if found else None


async def last_seq(world: World, sid: str) -> int:
    """The seq of the log's last entry (0 for an empty log)."""
    if isinstance(world, LastEntryReader):
        last = await world.last_entry(sid)
        return 0 if last is None else last.seq
    return await _bisected_end(world, sid)


async def _bisected_end(world: World, sid: str) -> int:
    """The last seq in O(log n) one-entry reads: gallop, then bisect."""

    async def beyond(seq: int) -> bool:
        return bool(await world.read(sid, seq, limit=1))

    if not await beyond(0):
        return 0
    low, high = 0, 1  # invariant: beyond(low) and not beyond(high)
    while await beyond(high):
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        if await beyond(mid):
            low = mid
        else:
            high = mid
    return high


async def window(world: World, sid: str, after: int, upto: int) -> list[Entry]:
    """The entries ``after < seq <= upto`` (a world may answer a read in parts)."""
    got: list[Entry] = []
    while after < upto:
        part = await world.read(sid, after, limit=upto - after)
        if not part:
            break
        got.extend(part)
        after = part[-1].seq
    return [e for e in got if e.seq <= upto]


async def backwards(world: World, sid: str, upto: int | None = None) -> AsyncIterator[Entry]:
    """The entries with ``seq <= upto`` (default: the whole log), newest first, read
    one page at a time; stop iterating to stop reading."""
    upto = await last_seq(world, sid) if upto is None else upto
    size = FIRST_PAGE
    while upto > 0:
        after = max(0, upto - size)
        page = await window(world, sid, after, upto)
        for entry in reversed(page):
            yield entry
        upto, size = after, min(LAST_PAGE, size * 2)


def fit(page: list[Entry]) -> int:
    """The next page's entry limit: about :data:`~fxworld.follow.PAGE_BYTES` after the
    largest entry of ``page`` (at least one entry, at most ``PAGE_ENTRIES``)."""
    largest = max(len(json.dumps(e.data)) for e in page)
    return max(1, min(PAGE_ENTRIES, PAGE_BYTES // max(largest, 1)))


async def pages(
    world: World, sid: str, after: int, upto: int, *, first: int = 4
) -> AsyncIterator[list[Entry]]:
    """The entries ``after < seq <= upto`` in bounded pages, in order: ``first``
    entries first (nothing is known of their size yet), then as many as :func:`fit`."""
    limit = first
    while after < upto:
        page = await window(world, sid, after, min(upto, after + limit))
        if not page:
            return
        yield page
        limit = fit(page)
        after = page[-1].seq
