"""Push for ``follow()`` (W10): one LISTEN connection per world wakes its followers,
and one notifier per world tells other processes' followers of its appends."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from fxworld.types import Entry
from fxworld_postgres._pool import Calls, Closer
from fxworld_postgres._statements import FOLLOW_PAGE, Statements, entry

__all__ = ["Connect", "Listener", "Notifier"]

Connect = Callable[[], Awaitable[tuple[Closer, asyncpg.Connection]]]
"""Opens a connection of the listener's or notifier's own (``_pool.own_connection``)."""


class Listener:
    """One LISTEN connection per world: wakes local followers when an append to a
    session they follow commits. Records the followed sessions in ``follows`` (with
    its backend pid) so that appends notify only for those. Reconnects on loss;
    while it is down, followers poll quickly."""

    def __init__(
        self, sql: Statements, calls: Calls, connect: Connect, *, channel: str, poll: float
    ) -> None:
        self._sql = sql
        self._calls = calls
        self._connect = connect
        self._channel = channel
        self._poll = poll  # the polling fallback's interval while connected
        self._subs: dict[str, int] = {}
        self._versions: dict[str, int] = {}
        self._events: dict[str, asyncio.Event] = {}
        self._lock = asyncio.Lock()
        self._connected = asyncio.Event()
        self._lost = asyncio.Event()
        self._driver: asyncpg.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._chores: set[asyncio.Task[None]] = set()
        self._reads: list[tuple[str, int, asyncio.Future[list[Entry]]]] = []

    async def subscribe(self, sid: str) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="fxworld-postgres-listener")
        self._subs[sid] = self._subs.get(sid, 0) + 1
        if self._subs[sid] > 1:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5.0):
                await self._connected.wait()
        await self._locked(self._sql.follow_add, [sid])

    def unsubscribe(self, sid: str) -> None:
        left = self._subs.get(sid, 0) - 1
        if left > 0:
            self._subs[sid] = left
            return
        self._subs.pop(sid, None)
        self._versions.pop(sid, None)
        with contextlib.suppress(RuntimeError):  # no running loop: the row is GC'd later
            task = asyncio.get_running_loop().create_task(self._forget(sid))
            self._chores.add(task)
            task.add_done_callback(self._chores.discard)

    def version(self, sid: str) -> int:
        return self._versions.get(sid, 0)

    async def read(self, sid: str, after: int) -> list[Entry]:
        """A follower's read of up to ``FOLLOW_PAGE`` entries after ``after``,
        joined with the reads of every follower woken by the same notifications:
        one statement (one round trip, one snapshot, so each slice is W9's
        contiguous slice) instead of one per follower."""
        future: asyncio.Future[list[Entry]] = asyncio.get_running_loop().create_future()
        self._reads.append((sid, after, future))
        if len(self._reads) == 1:  # the others woken now join before the next loop turn
            asyncio.get_running_loop().call_soon(self._read_together)
        return await future

    def _read_together(self) -> None:
        reads, self._reads = self._reads, []
        task = asyncio.get_running_loop().create_task(self._run_reads(reads))
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)

    async def _run_reads(self, reads: list[tuple[str, int, asyncio.Future[list[Entry]]]]) -> None:
        try:
            if len(reads) == 1:
                sid, after, _ = reads[0]
                rows = await self._calls.run(
                    "read", "all", self._sql.read, sid, after, FOLLOW_PAGE, idempotent=True
                )
                results = [[entry(sid, row) for row in rows]]
            else:
                rows = await self._calls.run(
                    "follow",
                    "all",
                    self._sql.read_many,
                    [sid for sid, _, _ in reads],
                    [after for _, after, _ in reads],
                    FOLLOW_PAGE,
                    idempotent=True,
                )
                results = [[] for _ in reads]
                for row in rows:
                    results[row[0] - 1].append(entry(reads[row[0] - 1][0], row[1:]))
        except Exception as e:  # each follower sees what its own read would have raised
            for _, _, future in reads:
                if not future.done():
                    future.set_exception(e)
            return
        except BaseException:  # the listener stops
            for _, _, future in reads:
                future.cancel()
            raise
        for (_, _, future), entries in zip(reads, results, strict=True):
            if not future.done():
                future.set_result(entries)

    async def wait(self, sid: str, seen: int) -> None:
        """Return when ``sid`` may have changed since version ``seen``, or after the
        polling fallback's interval (short while the listener is down)."""
        if self.version(sid) != seen:
            return
        timeout = self._poll if self._connected.is_set() else 0.1
        event = self._events.setdefault(sid, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await event.wait()

    async def stop(self) -> None:
        if self._subs:  # still followed: take our rows out so appends stop notifying
            self._subs.clear()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    await self._locked(self._sql.follow_drop_own)
        tasks = [t for t in (self._task, *self._chores) if t is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t
        self._task = None

    # -- internals --------------------------------------------------------------------

    async def _forget(self, sid: str) -> None:
        if sid in self._subs:
            return
        with contextlib.suppress(Exception):
            await self._locked(self._sql.follow_remove, sid)

    async def _locked(self, sql: str, *args: Any) -> None:
        async with self._lock:
            driver = self._driver
            if driver is None or driver.is_closed() or not self._connected.is_set():
                return  # registered again by _run when it reconnects
            with contextlib.suppress(Exception):
                await driver.execute(sql, *args)

    def _notified(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        sid = str(payload)
        if sid in self._subs:
            self._bump(sid)

    def _bump(self, sid: str) -> None:
        self._versions[sid] = self._versions.get(sid, 0) + 1
        event = self._events.pop(sid, None)
        if event is not None:
            event.set()

    def _bump_all(self) -> None:
        for sid in list(self._subs):
            self._bump(sid)

    def _terminated(self, _conn: object) -> None:
        self._connected.clear()
        self._lost.set()
        self._bump_all()

    async def _run(self) -> None:
        delay = 0.1
        while True:
            close: Closer | None = None
            try:
                close, driver = await self._connect()
                self._lost.clear()
                driver.add_termination_listener(self._terminated)
                await driver.add_listener(self._channel, self._notified)
                async with self._lock:
                    await driver.execute(self._sql.follow_gc)
                    await driver.execute(self._sql.follow_add, list(self._subs))
                    self._driver = driver
                    self._connected.set()
                self._bump_all()  # anything missed while down: re-read
                delay = 0.1
                await self._lost.wait()
            except asyncio.CancelledError:
                raise
            except Exception:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            finally:
                self._connected.clear()
                self._driver = None
                if close is not None:
                    with contextlib.suppress(BaseException):
                        await asyncio.shield(close())


class Notifier:
    """Tells followers (in any process) of this world's appends to sessions they
    follow: one statement notifies every session appended to since the previous one
    was sent, on a connection of its own. An append's own commit carries no NOTIFY
    (PostgreSQL serialises the commits that notify), and while one is on its way the
    next ones gather, so a busy process sends about one per round trip. If a NOTIFY
    cannot be sent, followers still see the entries at their polling fallback."""

    _TRIES = 2

    def __init__(
        self, sql: Statements, calls: Calls, connect: Connect, *, channel: str, pooled: bool
    ) -> None:
        self._sql = sql
        self._calls = calls
        self._connect = connect
        self._channel = channel
        self._pooled = pooled  # behind a transaction-mode pooler: no session to keep
        self._pending: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._close: Closer | None = None
        self._driver: asyncpg.Connection | None = None

    def notify(self, sid: str) -> None:
        self._pending.add(sid)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="fxworld-postgres-notifier"
            )

    async def _run(self) -> None:
        try:
            while self._pending:
                sids = list(self._pending)
                self._pending.clear()
                for _ in range(self._TRIES):
                    try:
                        await self._send(sids)
                        break
                    except Exception:  # a cut connection: once more on a new one
                        await self._drop()
        finally:
            self._task = None

    async def _send(self, sids: list[str]) -> None:
        if self._pooled:  # no session to keep: NOTIFY with the calls
            await self._calls.run("notify", "exec", self._sql.notify, self._channel, sids)
            return
        if self._driver is None or self._driver.is_closed():
            await self._drop()
            self._close, self._driver = await self._connect()
            # a NOTIFY's commit need not wait for the disk: it carries
            # no data, only news of appends already durable
            await self._driver.execute("SET synchronous_commit TO off")
        await self._driver.execute(self._sql.notify, self._channel, sids)

    async def _drop(self) -> None:
        close, self._close, self._driver = self._close, None, None
        if close is not None:
            with contextlib.suppress(BaseException):
                await asyncio.shield(close())

    async def close(self) -> None:
        """Send what is pending (briefly), then let the connection go."""
        if self._task is not None:
            with contextlib.suppress(BaseException):
                async with asyncio.timeout(2.0):
                    await asyncio.shield(self._task)
        if self._task is not None:
            self._task.cancel()
        await self._drop()
