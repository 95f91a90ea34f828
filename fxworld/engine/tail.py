"""The latest turn of a session, replayed alone (its end found by :mod:`fxworld.logends`).

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

from collections.abc import Callable

from fxworld import validate
from fxworld.logends import fit, last_seq, pages, window
from fxworld.protocol import World
from fxworld.types import Entry

from . import log
from .replay import Replay

__all__ = ["latest_turn_start", "replay_latest_turn"]

_FIRST_PAGE = 4
"""Entries in the first page read: nothing is known of their size yet."""


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
        limit = fit(page)
        upto = after
    return 1


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
    async for page in pages(world, sid, start - 1, last, first=_FIRST_PAGE):
        for e in page:
            state.apply(e)
            if watch is not None:
                watch(e)
    return state
