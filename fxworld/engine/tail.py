"""The end of a session's log: its last seq, and the latest turn replayed alone.

Listing the calls that wait for a decision, deciding one, stopping a turn and
answering a wake request need the state of the latest turn, not the whole
conversation. :func:`replay_latest_turn` finds where that turn's replay starts by
reading the log backwards from its end, and replays from there, one page at a
time: the reads and the memory it costs are those of the latest turn (and the
prompts queued behind it), however long the session is.

Where the replay starts: turns answer prompts in order, so every prompt before
the one the latest ``turn.started`` answers has been answered, and replaying
from that prompt sees the latest turn whole, its stop if one was asked before it
started, and every prompt still waiting behind it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

from fxworld import validate
from fxworld.follow import PAGE_BYTES, PAGE_ENTRIES
from fxworld.protocol import World
from fxworld.types import Entry

from . import log
from .replay import Replay

__all__ = ["last_seq", "latest_turn_start", "replay_latest_turn", "window"]

_FIRST_PAGE = 4
"""Entries in the first page read: nothing is known of their size yet."""


async def last_seq(world: World, sid: str) -> int:
    """The seq of the log's last entry (0 for an empty log), in O(log n)
    one-entry reads: gallop, then bisect (positions are dense: W4, W9)."""

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


def _fit(page: list[Entry]) -> int:
    """The next page's entry limit: about :data:`PAGE_BYTES` after the largest
    entry of ``page`` (at least one entry, at most :data:`PAGE_ENTRIES`)."""
    largest = max(len(json.dumps(e.data)) for e in page)
    return max(1, min(PAGE_ENTRIES, PAGE_BYTES // max(largest, 1)))


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


async def latest_turn_start(world: World, sid: str, last: int) -> int:
    """The seq the latest turn's replay starts at: the prompt its ``turn.started``
    answers (1 when no turn has started). Reads backwards from ``last``, one
    bounded page at a time."""
    upto, limit = last, _FIRST_PAGE
    while upto > 0:
        after = max(0, upto - limit)
        page = await window(world, sid, after, upto)
        if not page:
            break
        for e in reversed(page):
            if e.kind == log.TURN_STARTED:
                return min(int(e.data["prompt"]), e.seq)
        limit = _fit(page)
        upto = after
    return 1


async def _pages(world: World, sid: str, after: int, upto: int) -> AsyncIterator[list[Entry]]:
    """The entries ``after < seq <= upto`` in bounded pages, in order."""
    limit = _FIRST_PAGE
    while after < upto:
        page = await window(world, sid, after, min(upto, after + limit))
        if not page:
            return
        yield page
        limit = _fit(page)
        after = page[-1].seq


async def replay_latest_turn(
    world: World,
    sid: str,
    *,
    watch: Callable[[Entry], None] | None = None,
    last: int | None = None,
) -> Replay:
    """The state of session ``sid`` as far as its latest turn goes (see the
    module): ``current`` is the turn in progress, if any, and prompts that wait
    behind it are known; the conversation holds only that turn. ``watch`` sees
    each entry replayed, in order. ``last``: the log's last seq when the caller
    knows it (the state is then the one at that seq)."""
    validate.session_id(sid)
    if last is None:
        last = await last_seq(world, sid)
    start = await latest_turn_start(world, sid, last) if last else 1
    state = Replay(last_seq=start - 1)
    async for page in _pages(world, sid, start - 1, last):
        for e in page:
            state.apply(e)
            if watch is not None:
                watch(e)
    return state
