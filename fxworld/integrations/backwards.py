"""Reading a session's log from its end: what both integrations' reads of "the
latest" cost.

A framework asks for the newest state (LangGraph's latest checkpoint, the Agents
SDK's last ``n`` items). The World protocol reads forwards from a cursor (W9), so
these helpers find the log's end and read it backwards one page at a time: the cost
is that of the entries read, never of the whole log.

- The end: one request on a world that gives its last entry
  (:class:`~fxworld.protocol.LastEntryReader`: memory, SQLite, PostgreSQL, Redis,
  S3, and ``EncryptedWorld`` over any of them); else about ``2 log2(n)`` one-entry
  reads.
- Each page: one ``read`` (a world may answer it in parts: one request per part).
  Pages start at :data:`FIRST_PAGE` entries and double up to :data:`LAST_PAGE`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from fxworld.engine.tail import last_seq, window
from fxworld.protocol import LastEntryReader, World
from fxworld.types import Entry

__all__ = ["FIRST_PAGE", "LAST_PAGE", "end_of", "backwards"]

FIRST_PAGE = 8
"""Entries in the first page read backwards: a latest checkpoint and its writes, or
the last few items, fit in it."""

LAST_PAGE = 256
"""The most entries one backwards page asks for."""


async def end_of(world: World, sid: str) -> int:
    """The seq of the log's last entry (0 for an empty log)."""
    if isinstance(world, LastEntryReader):
        last = await world.last_entry(sid)
        return 0 if last is None else last.seq
    return await last_seq(world, sid)


async def backwards(world: World, sid: str, upto: int | None = None) -> AsyncIterator[Entry]:
    """The entries with ``seq <= upto`` (default: the whole log), newest first, read
    one page at a time; stop iterating to stop reading."""
    upto = await end_of(world, sid) if upto is None else upto
    size = FIRST_PAGE
    while upto > 0:
        after = max(0, upto - size)
        page = await window(world, sid, after, upto)
        for entry in reversed(page):
            yield entry
        upto, size = after, min(LAST_PAGE, size * 2)
