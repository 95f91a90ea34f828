"""The followers of one S3 world share one poller of their sessions' next positions (W10).

Batches form a chain with no hole (W9), so a follower that has read up to the tail
waits for one object: the batch at the position after the tail, ``b/{last+1}``,
absent (404) until it lands. Each follower says which session it waits on; one
poller per world and event loop asks each session's next position once for all its
followers, at most :data:`POLLS_PER_SECOND` GETs a second in all, :data:`AT_ONCE` at
a time, and each session's followers read again when it landed, or when the session
has been quiet for :data:`QUIET` seconds (later with many followers: at most
:data:`QUIET_READS_PER_SECOND` such reads a second in all), a safety net only: the
chain has no hole, so the next position is exact.

A session is asked every 40 ms for :data:`FAST` seconds after its last batch (a
waiting follower sees a new batch about 20 ms plus one GET after it landed), then
backing off to 400 ms; with more than 20 sessions followed the budget stretches that
(100 sessions: each about every 2 s). Writers write nothing for followers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

__all__ = ["Poller", "POLLS_PER_SECOND", "AT_ONCE", "QUIET", "QUIET_READS_PER_SECOND", "FAST"]

POLLS_PER_SECOND = 50.0
"""The most GETs of next positions the followers of one world make per second."""
AT_ONCE = 4
"""The most of those GETs in flight at once (the client's other calls keep the rest)."""
QUIET = 10.0
"""Seconds without a new batch after which a session's followers read anyway."""
QUIET_READS_PER_SECOND = 20.0
"""The most reads of quiet sessions' followers per second in all."""
FAST = 2.0
"""Seconds after a session's last batch during which it is asked every 40 ms."""
_FIRST, _MOST, _BACKOFF = 0.04, 0.4, 1.5  # s from one ask's start to the next

Probe = Callable[[str, int], Awaitable[bool]]
"""``probe(session_id, cursor)``: whether a batch past ``cursor`` (the least cursor of
the session's waiting followers) has landed since this world last read the session."""


@dataclass
class _Session:
    """One followed session: when to ask again, who waits."""

    version: int = 0  # grows when its followers should read again
    interval: float = _FIRST
    due: float = 0.0  # monotonic time of the next ask
    quiet_until: float = 0.0  # monotonic time after which its followers read anyway
    fast_until: float = 0.0  # asked every 40 ms until then (FAST after its last batch)
    waiting: dict[asyncio.Future[None], int] = field(default_factory=dict)  # -> cursor


class Poller:
    """The followed sessions of one world on one event loop, and their poller."""

    def __init__(self, probe: Probe) -> None:
        self._probe = probe
        self._sessions: dict[str, _Session] = {}
        self._added = asyncio.Event()
        self._next_slot = 0.0  # when the next ask may start (the rate budget)
        self._next_quiet = 0.0  # when quiet followers may read again (their budget)
        self._pollers: list[asyncio.Task[None]] = []

    def version(self, sid: str) -> int:
        """Take before reading; :meth:`wait` with it returns at once if it moved."""
        return self._session(sid).version

    async def wait(self, sid: str, seen: int, cursor: int) -> None:
        """Return once the follower of ``sid`` at seq ``cursor`` should read again
        after :meth:`version` ``seen``; raise what asking its next position raised."""
        s = self._session(sid)
        if s.version != seen:
            return
        done = asyncio.get_running_loop().create_future()
        s.waiting[done] = cursor
        if not any(not t.done() for t in self._pollers):
            self._pollers = [asyncio.create_task(self._poll()) for _ in range(AT_ONCE)]
        try:
            await done
        finally:
            s.waiting.pop(done, None)

    def _session(self, sid: str) -> _Session:
        s = self._sessions.get(sid)
        if s is None:
            now = time.monotonic()
            s = self._sessions[sid] = _Session(
                due=now, quiet_until=now + QUIET, fast_until=now + FAST
            )
            self._added.set()
        return s

    async def _poll(self) -> None:
        """Ask the session that is due first, within the budget, while anyone waits; a
        session nobody waits on is dropped when it comes due."""
        while self._sessions:
            sid, s = min(self._sessions.items(), key=lambda kv: kv[1].due)
            now = time.monotonic()
            if s.due > now:
                self._added.clear()
                await _sleep_or(self._added, s.due - now)
                continue
            if not s.waiting:
                del self._sessions[sid]
                continue
            s.due = float("inf")  # taken: the other pollers pass it by
            start = max(now, self._next_slot)
            self._next_slot = start + 1.0 / POLLS_PER_SECOND
            await asyncio.sleep(start - now)
            asked = time.monotonic()
            try:
                changed = await self._probe(sid, min(s.waiting.values(), default=0))
            except Exception as e:  # the store's error, after its retries: its followers'
                _fail(s, e)
                self._sessions.pop(sid, None)
                continue
            self._saw(s, changed, asked)

    def _saw(self, s: _Session, changed: bool, asked: float) -> None:
        """A probe's answer: wake the session's followers if a batch landed, or if quiet."""
        now = time.monotonic()
        quiet = not changed and now >= max(s.quiet_until, self._next_quiet)
        if quiet:
            self._next_quiet = now + len(s.waiting) / QUIET_READS_PER_SECOND
        if changed or quiet:
            s.version += 1
            s.interval = _FIRST if changed else s.interval
            s.quiet_until = now + QUIET
            s.fast_until = now + FAST if changed else s.fast_until
            for done in s.waiting:
                if not done.done():
                    done.set_result(None)
        elif now >= s.fast_until:
            s.interval = min(s.interval * _BACKOFF, _MOST)
        s.due = asked + s.interval  # from the ask's start: the period is the interval


async def _sleep_or(event: asyncio.Event, seconds: float) -> None:
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        pass


def _fail(s: _Session, error: BaseException) -> None:
    s.version += 1
    for done in s.waiting:
        if not done.done():
            done.set_exception(error)
