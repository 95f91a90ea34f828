"""The world, carefully: the one part of a session run that writes.

A run of one session's wake writes only through its :class:`FencedWriter`: the
fence it ``acquire``\\ s (W1: every older holder is refused from then on), every
fenced append (W2), the wake's lease (renewed in the background, W12) and its
finish (W13). The writer also holds the run's :class:`~fxworld.engine.replay.Replay`
state and keeps it equal to the log: what an append landed is applied to it, and
entries of other writers (prompts, decisions, a stop) are read in order.

Its rules, so that nothing is lost or doubled:

- ``BackendUnavailable`` is retried with backoff (:meth:`FencedWriter.retry`), for
  at most a minute; then the run stops (:class:`StopRun`) and its lease runs out.
- A fenced append whose outcome is unknown (``BackendUnavailable`` after it was
  sent) is never sent again before its outcome is known: the writer reads the log
  after what it knew, and since only this fence writes entries of its epoch (W2,
  W8), any such entry there means it landed.
- ``Fenced`` is never caught here: the run was replaced, and stops at once with no
  further write and no further side effect.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import TypeVar

from fxworld.errors import BackendUnavailable, LeaseLost
from fxworld.protocol import World
from fxworld.types import Entry, Fence, NewEntry, WakeLease

from ..replay import Replay

__all__ = ["FencedWriter", "StopRun"]

logger = logging.getLogger("fxworld.worker")
T = TypeVar("T")

BACKOFF_START = 0.1
BACKOFF_MAX = 2.0
UNAVAILABLE_GIVE_UP = 60.0
"""Seconds of ``BackendUnavailable`` after which a run stops (its lease then runs
out and another worker continues)."""


class StopRun(Exception):
    """This run must stop now (lease lost, storage gone too long)."""


class FencedWriter:
    """Everything one run of session ``wake.session_id`` writes; see the module.

    ``state`` is the session as far as the log goes (this run's entries and what
    it read of others'). ``on_news`` is called after entries of other writers were
    read in by an append (the run looks there for a stop).
    """

    def __init__(self, world: World, wake: WakeLease, *, lease: float) -> None:
        self.world = world
        self.wake = wake
        self.sid = wake.session_id
        self.lease = lease
        self.state = Replay()
        self.fence: Fence | None = None
        self.lease_lost = False
        self.on_news: Callable[[], None] = _nothing
        self.last_read: Entry | None = None
        """The newest entry a read brought in."""

    async def retry(self, op: Callable[[], Awaitable[T]]) -> T:
        """``op()``, again with backoff while the world is unavailable; an
        operation that may be repeated (a read, an acquire, a keyed append)."""
        started = time.monotonic()
        delay = BACKOFF_START
        while True:
            try:
                return await op()
            except BackendUnavailable as e:
                delay = await self._back_off(started, delay, e)

    async def _back_off(self, started: float, delay: float, e: BackendUnavailable) -> float:
        """Sleep ``delay`` (or stop the run after :data:`UNAVAILABLE_GIVE_UP`); the next delay."""
        if time.monotonic() - started > UNAVAILABLE_GIVE_UP:
            raise StopRun(f"storage unavailable for too long: {e}") from e
        await asyncio.sleep(delay)
        return min(delay * 2, BACKOFF_MAX)

    async def catch_up(self) -> None:
        """Read what the log holds past the state, in order, and apply it."""
        while True:
            batch = await self.retry(partial(self.world.read, self.sid, self.state.last_seq))
            if not batch:
                return
            self.state.apply_all(batch)
            self.last_read = batch[-1]

    async def acquire(self) -> Fence:
        """Take the session (W1): a new fence, the newest from now on."""
        self.fence = await self.retry(lambda: self.world.acquire(self.sid))
        return self.fence

    async def append(self, entries: Sequence[NewEntry], *, wake: float | None = None) -> int:
        """Append with this run's fence (W2; ``wake``: W7) and apply what landed to
        the state; the seq of the last entry."""
        fence = self.fence
        assert fence is not None, "append before acquire"
        started = time.monotonic()
        delay = BACKOFF_START
        while True:
            try:
                seq = await self.world.append(self.sid, entries, fence=fence, wake=wake)
                break
            except BackendUnavailable as e:
                logger.warning("session %s: append failed (%s); checking and retrying", self.sid, e)
                delay = await self._back_off(started, delay, e)
                if await self._landed(fence):
                    await self.catch_up()
                    self.on_news()
                    return self.state.last_seq
        if seq - len(entries) == self.state.last_seq:
            self._apply(seq, entries, fence)
        else:  # prompts (or a stop) landed in between: read them in order
            await self.catch_up()
            self.on_news()
        return seq

    async def _landed(self, fence: Fence) -> bool:
        """Whether an append of ``fence`` whose outcome is unknown landed: only this
        fence writes entries of its epoch (W2, W8), so one past what we know means
        it did. Never retry it before knowing."""
        landed = await self.retry(partial(self.world.read, self.sid, self.state.last_seq))
        return any(x.epoch == fence.epoch for x in landed)

    def _apply(self, seq: int, entries: Sequence[NewEntry], fence: Fence) -> None:
        """Apply the entries that landed together, up to ``seq`` (W4), to the state."""
        first = seq - len(entries) + 1
        now = datetime.now(UTC)
        for i, ne in enumerate(entries):
            self.state.apply(Entry(self.sid, first + i, ne.kind, ne.data, fence.epoch, now))

    async def append_keyed(self, entry: NewEntry, key: str) -> None:
        """Append ``entry`` with idempotency key ``key`` (W6), then read the log: the
        entry that stands under the key is this one or an earlier writer's."""
        fence = self.fence
        assert fence is not None, "append before acquire"
        await self.retry(lambda: self.world.append(self.sid, [entry], fence=fence, key=key))
        await self.catch_up()

    async def wake_again(self, delay: float) -> None:
        """Ask for a wake of this session in ``delay`` seconds (W11)."""
        await self.retry(lambda: self.world.wake(self.sid, delay=delay))

    async def renew(self) -> None:
        """Renew the lease every third of it, until cancelled or lost (W12)."""
        interval = max(self.lease / 3, 0.05)
        while True:
            await asyncio.sleep(interval)
            try:
                self.wake = await self.world.renew_wake(self.wake, lease=self.lease)
            except LeaseLost:
                self.lease_lost = True
                return
            except BackendUnavailable as e:
                logger.warning("session %s: lease renewal failed: %s", self.sid, e)

    async def finish_wake(self) -> None:
        """Finish the wake (W13: a wake asked for meanwhile keeps the session due)."""
        try:
            await self.retry(lambda: self.world.finish_wake(self.wake))
        except LeaseLost:
            logger.info("session %s: lease already gone at finish; it is delivered again", self.sid)


def _nothing() -> None:
    return None
