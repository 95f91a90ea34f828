"""The followers of one S3 world share one poller of their sessions' tail hints (W10).

Each follower used to poll its session's hint object itself (a conditional GET,
every 50 to 400 ms) and to read the log every 2 s: 300 idle followers made about
750 GETs and 150 LISTs a second, took the client's connections and the server's
time, and every append, read and wake of the process waited behind them. Here a
follower says which session it waits on; one poller per world and event loop asks
each session's hint once for all its followers, at most :data:`POLLS_PER_SECOND`
hints a second in all, :data:`AT_ONCE` at a time, and each session's followers read
again when its hint changed, or when it has been quiet for :data:`QUIET` seconds
(later with many followers: at most :data:`QUIET_READS_PER_SECOND` such reads a
second in all), in case a writer died before it wrote its hint.

A quiet session is asked again after 50 ms, backing off to 400 ms, as before; with
more than 40 sessions followed the budget stretches that (100 sessions: each about
once a second).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

__all__ = ["Hints", "POLLS_PER_SECOND", "AT_ONCE", "QUIET", "QUIET_READS_PER_SECOND"]

POLLS_PER_SECOND = 100.0
"""The most hint GETs the followers of one world make per second."""
AT_ONCE = 4
"""The most hint GETs in flight at once (the client's other calls keep the rest)."""
QUIET = 2.0
"""Seconds of an unchanged hint after which a session's followers read anyway."""
QUIET_READS_PER_SECOND = 20.0
"""The most reads of quiet sessions' followers per second in all."""
_FIRST, _MOST, _BACKOFF = 0.05, 0.4, 1.5  # s between two asks of a quiet session

GetHint = Callable[[str, str | None], Awaitable[tuple[str | None, int]]]
"""``get(session_id, etag)``: the hint's etag now (None if there is none) and the
first seq of the batch it names (0 when unknown: absent, or still ``etag``)."""


@dataclass
class _Session:
    """One followed session: what its hint was, when to ask again, who waits."""

    etag: str | None = None
    asked: bool = False  # its hint was asked once (the first answer is judged by seq)
    version: int = 0  # grows when its followers should read again
    interval: float = _FIRST
    due: float = 0.0  # monotonic time of the next ask
    quiet_until: float = 0.0  # monotonic time after which its followers read anyway
    waiting: dict[asyncio.Future[None], int] = field(default_factory=dict)  # -> cursor


class Hints:
    """The followed sessions of one world on one event loop, and their poller."""

    def __init__(self, get: GetHint) -> None:
        self._get = get
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
        after :meth:`version` ``seen``; raise what asking its hint raised."""
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
            s = self._sessions[sid] = _Session(due=now, quiet_until=now + QUIET)
            self._added.set()
        return s

    async def _poll(self) -> None:
        """Ask the hint that is due first, within the budget, while anyone waits; a
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
            try:
                etag, first = await self._get(sid, s.etag)
            except Exception as e:  # the store's error, after its retries: its followers'
                _fail(s, e)
                self._sessions.pop(sid, None)
                continue
            self._saw(s, etag, first)

    def _saw(self, s: _Session, etag: str | None, first: int) -> None:
        """A hint's answer: wake the session's followers if it changed, or if quiet.
        The first answer has nothing to compare with: it wakes them if the batch it
        names is past a follower's cursor (it landed after that follower read)."""
        now = time.monotonic()
        if s.asked:
            changed = etag != s.etag
        else:
            changed = any(first > cursor for cursor in s.waiting.values())
        s.asked, s.etag = True, etag
        quiet = not changed and now >= max(s.quiet_until, self._next_quiet)
        if quiet:
            self._next_quiet = now + len(s.waiting) / QUIET_READS_PER_SECOND
        if changed or quiet:
            s.version += 1
            s.interval = _FIRST if changed else s.interval
            s.quiet_until = now + QUIET
            for done in s.waiting:
                if not done.done():
                    done.set_result(None)
        else:
            s.interval = min(s.interval * _BACKOFF, _MOST)
        s.due = now + s.interval


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
