"""PostgresWorld: see the package docstring for URL, options and capabilities."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import Any, Literal
from urllib.parse import urlencode

import asyncpg
from sqlalchemy import text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util import greenlet_spawn

from fxworld import validate
from fxworld.errors import ConfigurationError
from fxworld.follow import poll_follow
from fxworld.types import Entry, Fence, NewEntry, WakeLease, WakeState
from fxworld.urls import mask, split_query, unparseable
from fxworld_postgres import _errors, _pooler, _schema

__all__ = ["PostgresWorld"]

_SCHEMES = {"postgresql", "postgres", "postgresql+asyncpg"}
_RETRIES = 3
_BACKOFF = (0.05, 0.2, 0.5)
_MAX_STALE = 64
_CHECKOUT_TIMEOUT = 30.0
_FOLLOW_PAGE = 1000  # entries per follow read
_Fetch = Literal["val", "row", "all", "exec"]


class PostgresWorld:
    """A World on PostgreSQL: durable, shared by any number of processes, push follow.

    ``dsn`` is a ``postgresql://``, ``postgres://`` or ``postgresql+asyncpg://`` URL,
    or the application's own SQLAlchemy ``AsyncEngine`` on the asyncpg driver (left
    open by :meth:`close`: the application owns it). ``namespace`` selects the
    Postgres schema ``fxworld_<namespace>``; worlds with different namespaces share
    nothing. ``pool_size`` sizes the engine this world creates (ignored for an
    engine given): the world opens at most :attr:`connection_budget` connections.
    ``pooler`` is ``"transaction"`` or ``"session"`` behind a connection pooler in
    that mode, ``listen_url`` a direct URL for ``follow()``'s LISTEN (see
    ``_pooler``). Run :meth:`setup` once (or ``fxworld setup --world URL``).
    """

    capabilities: frozenset[str] = frozenset({"durable", "shared", "push_follow"})

    def __init__(
        self,
        dsn: str | AsyncEngine,
        *,
        namespace: str | None = None,
        max_entry_bytes: int = validate.DEFAULT_MAX_ENTRY_BYTES,
        pool_size: int = 5,
        follow_poll: float = 1.0,
        pooler: str | None = None,
        listen_url: str | None = None,
    ) -> None:
        if isinstance(dsn, str) and "?" in dsn:  # fxworld's own URL options
            dsn, options = _own_options(dsn)
            namespace = namespace if namespace is not None else options.get("namespace")
            max_entry_bytes = validate.max_entry_bytes(
                options.get("max_entry_bytes", max_entry_bytes)
            )
            pool_size = int(options.get("pool_size", pool_size))
            follow_poll = float(options.get("follow_poll", follow_poll))
            pooler = options.get("pooler", pooler)
            listen_url = options.get("listen_url", listen_url)
        self.namespace = validate.namespace("default" if namespace is None else namespace)
        self.max_entry_bytes = validate.max_entry_bytes(max_entry_bytes)  # W15
        self.follow_poll = float(follow_poll)
        self.pooler = _pooler.mode(pooler, dsn if isinstance(dsn, str) else "")
        self._listen_dsn = _pooler.listen_dsn(listen_url) if listen_url else None
        if isinstance(dsn, AsyncEngine):
            if dsn.dialect.driver != "asyncpg":
                raise ConfigurationError(
                    f"PostgresWorld needs an AsyncEngine on the asyncpg driver, "
                    f"not {dsn.dialect.name}+{dsn.dialect.driver}"
                )
            self._engine = dsn
            self._owns_engine = False
        elif isinstance(dsn, str):
            self._engine = create_async_engine(
                _engine_url(dsn),
                pool_size=pool_size,
                # the listener, the notifier and setup(): the budget, kept by the pool
                max_overflow=_pooler.EXTRA_CONNECTIONS,
                pool_timeout=10,
                connect_args=_pooler.connect_args(self.pooler),
            )
            self._owns_engine = True
        else:
            raise ConfigurationError(
                f"PostgresWorld takes a URL or an AsyncEngine, not {type(dsn).__name__}"
            )
        self._url = mask(self._engine.url.render_as_string(hide_password=False))
        self._sql = _Statements(_schema.qualified(self.namespace))
        self._listener: _Listener | None = None
        self._notifier = _Notifier(self)
        self._hot = _HotConnections(self._engine, _hot_limit(self._engine, pool_size))
        self.connection_budget = _pooler.budget(pool_size)
        """The most server connections this world opens at once (an engine given
        brings its own pool's limits)."""
        self._closed = False
        self._setup_tried = False  # setup() ran, or a call already set the namespace up
        self._setting_up: asyncio.Future[None] | None = None  # the setup() in flight
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def from_url(cls, url: str) -> PostgresWorld:
        """``postgresql://user:password@host:port/db?namespace=ns&max_entry_bytes=n&pool_size=n``
        (also ``postgres://`` and ``postgresql+asyncpg://``); other query parameters go
        to the driver."""
        return cls(url)

    def __repr__(self) -> str:
        return f"PostgresWorld({self._url!r}, namespace={self.namespace!r})"

    @property
    def engine(self) -> AsyncEngine:
        """The SQLAlchemy engine this world uses."""
        return self._engine

    # -- lifecycle ------------------------------------------------------------------

    async def _on_this_loop(self) -> None:
        """Connections belong to the event loop that opened them. Used from a new loop
        (a second ``asyncio.run``), the world drops what it kept from the old one
        (and the pool of its own engine; an application's engine is the
        application's to manage, as SQLAlchemy requires)."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        if self._loop is not None:
            self._setting_up = None
            await self._hot.forget()
            self._listener = None
            self._notifier = _Notifier(self)
            if self._owns_engine:
                await self._engine.dispose(close=False)
        self._loop = loop

    async def setup(self) -> None:
        """Create or migrate this namespace's schema. Idempotent; safe from several
        processes at once (a transaction-scoped advisory lock serialises them).
        Calls at once in one process share one run: one connection (the budget)."""
        await self._on_this_loop()
        self._setup_tried = True
        running = self._setting_up
        if running is None or running.done():
            running = self._setting_up = asyncio.ensure_future(self._setup())
        await asyncio.shield(running)

    async def _setup(self) -> None:
        for attempt in range(_RETRIES):
            try:
                async with self._engine.begin() as conn:
                    await _migrate(conn, self.namespace)
                return
            except Exception as e:
                if attempt + 1 < _RETRIES and _errors.retry_safe(e, sent=True, idempotent=True):
                    await asyncio.sleep(_BACKOFF[attempt])
                    continue
                raise _errors.translate(e, what="setup") from None

    async def close(self) -> None:
        """Stop the listener and, if this world created it, dispose of the engine."""
        if self._closed:
            return
        self._closed = True
        await self._on_this_loop()
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None
        await self._notifier.close()
        await self._hot.close()
        if self._owns_engine:
            with contextlib.suppress(Exception):  # best effort: the server may be gone
                await self._engine.dispose()

    # -- append-with-fence ------------------------------------------------------------

    async def acquire(self, session_id: str) -> Fence:
        validate.session_id(session_id)
        row = await self._call(
            "acquire", "row", self._sql.acquire, session_id, session_id=session_id
        )
        return Fence(session_id, int(row[0]), int(row[1]))

    async def append(
        self,
        session_id: str,
        entries: Sequence[NewEntry],
        *,
        fence: Fence | None = None,
        expect: int | None = None,
        key: str | None = None,
        wake: float | None = None,
    ) -> int:
        _, encoded = validate.append(
            session_id,
            entries,
            fence=fence,
            expect=expect,
            key=key,
            wake=wake,
            max_bytes=self.max_entry_bytes,
        )
        kinds = [_kind_out(kind) for kind, _ in encoded]
        datas: list[str | None] = []
        raws: list[str | None] | None = None
        for i, (_, data) in enumerate(encoded):
            if _jsonb_safe(data):
                datas.append(data)
                if raws is not None:
                    raws.append(None)
            else:
                datas.append(None)
                if raws is None:
                    raws = [None] * i
                raws.append(data)
        epoch = fence.epoch if fence is not None else None
        seq, followed = await self._call(
            "append",
            "row",
            self._sql.append,
            session_id,
            kinds,
            datas,
            raws,
            epoch,
            expect,
            key.encode("utf-8", "surrogatepass") if key is not None else None,
            float(wake) if wake is not None else None,
            idempotent=key is not None,
            session_id=session_id,
            epoch=epoch,
            expected=expect,
        )
        if followed:  # W10: pushed just after the commit, with other appends' pushes
            self._notifier.notify(session_id)
        return int(seq)

    # -- read-from-cursor ---------------------------------------------------------------

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        validate.session_id(session_id)
        validate.read_args(after, limit)
        rows = await self._call(
            "read", "all", self._sql.read, session_id, after, limit, idempotent=True
        )
        return [_entry(session_id, row) for row in rows]

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Entry]:
        validate.session_id(session_id)
        validate.read_args(after, 1)
        return self._follow(session_id, after)

    async def _follow(self, session_id: str, after: int) -> AsyncIterator[Entry]:
        await self._on_this_loop()
        if self.pooler == "transaction" and self._listen_dsn is None:
            # no session to LISTEN on: poll, every follow_poll seconds at most (W10)
            async for entry in poll_follow(
                self._follow_page, session_id, after, interval=self.follow_poll
            ):
                yield entry
            return
        if self._listener is None:
            self._listener = _Listener(self)
        listener = self._listener
        await listener.subscribe(session_id)
        try:
            seen = listener.version(session_id)

            async def read(sid: str, cursor: int) -> list[Entry]:
                nonlocal seen
                seen = listener.version(sid)
                return await listener.read(sid, cursor)

            async def changed() -> None:
                await listener.wait(session_id, seen)

            async for entry in poll_follow(read, session_id, after, changed=changed):
                yield entry
        finally:
            listener.unsubscribe(session_id)

    async def _follow_page(self, session_id: str, after: int) -> list[Entry]:
        return await self.read(session_id, after, limit=_FOLLOW_PAGE)

    # -- enqueue-wake ------------------------------------------------------------------

    async def wake(self, session_id: str, *, delay: float = 0.0) -> None:
        validate.session_id(session_id)
        seconds = validate.delay(delay)
        await self._call("wake", "exec", self._sql.wake, session_id, seconds, idempotent=True)

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        taken = await self.take_wakes(lease=lease, limit=1)
        return taken[0] if taken else None

    async def take_wakes(self, *, lease: float, limit: int = 10) -> list[WakeLease]:
        """Take up to ``limit`` due wakes at once, each under its own lease (W12).

        The native batch of ``fxworld.protocol.WakeBatcher`` (callers use
        ``fxworld.take_wakes``), for workers that run several sessions side by
        side: one statement. Earliest due first; rows other takers hold are
        skipped, never waited for.
        """
        seconds = validate.lease(lease)
        limit = validate.wake_batch(limit)  # W15
        rows = await self._call("take_wake", "all", self._sql.take, seconds, limit)
        return [WakeLease(r[0], r[1], int(r[2]), r[3]) for r in rows]

    async def renew_wake(self, wake: WakeLease, *, lease: float) -> WakeLease:
        seconds = validate.lease(lease)
        _check_lease(wake)
        until = await self._call(
            "renew_wake",
            "val",
            self._sql.renew,
            wake.session_id,
            wake.token,
            seconds,
            idempotent=True,
            session_id=wake.session_id,
        )
        return WakeLease(wake.session_id, wake.token, wake.attempt, until)

    async def finish_wake(self, wake: WakeLease) -> None:
        _check_lease(wake)
        await self._call(
            "finish_wake",
            "exec",
            self._sql.finish,
            wake.session_id,
            wake.token,
            session_id=wake.session_id,
        )

    # -- lifecycle of sessions ----------------------------------------------------------

    async def delete(self, session_id: str) -> None:
        validate.session_id(session_id)
        await self._call("delete", "exec", self._sql.delete, session_id, idempotent=True)

    async def last_entry(self, session_id: str) -> Entry | None:
        """The log's last entry, or ``None``: one statement, backwards on the key
        (``fxworld.protocol.LastEntryReader``)."""
        validate.session_id(session_id)
        row = await self._call("last_entry", "row", self._sql.last, session_id, idempotent=True)
        return None if row is None else _entry(session_id, row)

    async def delete_if_idle(self, session_id: str, *, last: int) -> bool:
        """``delete`` only if the log still ends at ``last`` and no wake is pending
        (``fxworld.protocol.IdleDeleter``): one statement. Its ``UPDATE`` of the
        session row waits for an append that holds the row and then sees its new
        ``last_seq`` (so it refuses); an append that comes after it finds the log
        empty and starts it at seq 1 (W14). A ``wake()`` that commits meanwhile is
        not deleted: it stays, a wake of an empty session."""
        validate.session_id(session_id)
        last = validate.last_seq(last)
        row = await self._call(
            "delete_if_idle", "row", self._sql.delete_if_idle, session_id, last,
            session_id=session_id,
        )  # fmt: skip
        if row is not None and row[0]:
            self._notifier.notify(session_id)  # W10: followers see the log go
        return row is not None

    async def list_sessions(self, *, after: str = "", limit: int = 100) -> list[str]:
        """Ids of sessions with a non-empty log, ascending, greater than ``after``."""
        validate.list_args(after, limit)
        rows = await self._call(
            "list_sessions", "all", self._sql.sessions, after, limit, idempotent=True
        )
        return [r[0] for r in rows]

    # -- WakeLister: read-only, takes nothing (W11-W13 untouched) --------------------------

    async def wake_state(self, session_id: str) -> WakeState | None:
        validate.session_id(session_id)
        row = await self._call(
            "wake_state", "row", self._sql.wake_state, session_id, idempotent=True
        )
        return None if row is None else WakeState(row[0], row[1], row[2], int(row[3]))

    async def list_wakes(self, *, after: str = "", limit: int = 100) -> list[WakeState]:
        validate.list_args(after, limit)
        rows = await self._call("list_wakes", "all", self._sql.wakes, after, limit, idempotent=True)
        return [WakeState(r[0], r[1], r[2], int(r[3])) for r in rows]

    # -- the one way to the server -------------------------------------------------------

    async def _call(
        self,
        what: str,
        fetch: _Fetch,
        sql: str,
        *args: Any,
        idempotent: bool = False,
        session_id: str | None = None,
        epoch: int | None = None,
        expected: int | None = None,
    ) -> Any:
        """Run one statement on a pooled connection's asyncpg driver: one round trip.

        Retries what ``_errors.retry_safe`` allows, then translates the error.
        """
        if self._loop is not asyncio.get_running_loop():
            await self._on_this_loop()
        attempt = 0
        stale = 0  # pooled connections found closed: discarded, not counted as attempts
        while True:
            sent = False
            try:
                fairy = await self._hot.get()
                driver = fairy.driver_connection
                if driver is None or driver.is_closed():
                    await self._hot.drop(fairy)
                    raise _errors.NotSent()
                sent = True
                try:
                    if fetch == "val":
                        result = await driver.fetchval(sql, *args)
                    elif fetch == "row":
                        result = await driver.fetchrow(sql, *args)
                    elif fetch == "all":
                        result = await driver.fetch(sql, *args)
                    else:
                        result = await driver.execute(sql, *args)
                except BaseException as e:
                    if _errors.connection_broken(e):
                        await asyncio.shield(self._hot.drop(fairy))
                    else:
                        self._hot.put(fairy)
                    raise
                self._hot.put(fairy)
                return result
            except Exception as e:
                if isinstance(e, _errors.NotSent) and stale < _MAX_STALE:
                    stale += 1
                    continue
                if not self._setup_tried and _errors.not_set_up(e):
                    # A world used without setup(): set the namespace up once, run again.
                    await self.setup()
                    continue
                if attempt + 1 < _RETRIES and _errors.retry_safe(
                    e, sent=sent, idempotent=idempotent
                ):
                    await asyncio.sleep(_BACKOFF[attempt])
                    attempt += 1
                    continue
                raise _errors.translate(
                    e, what=what, session_id=session_id, epoch=epoch, expected=expected
                ) from None

    async def _driver_session(self, *, listen: bool) -> tuple[_Closer, asyncpg.Connection]:
        """A connection of its own, held outside the calls' share of the pool (the
        listener's, the notifier's), and how to close it for good: for the listener,
        a direct one to ``listen_url`` when one is given, else one of the engine's."""
        if listen and self._listen_dsn is not None:
            try:
                driver = await _pooler.listen(self._listen_dsn)
            except Exception as e:
                raise _errors.translate(e, what="listen") from None
            return driver.close, driver
        conn = await self._engine.connect()
        try:
            driver = (await conn.get_raw_connection()).driver_connection
            assert driver is not None
            return functools.partial(_discard, conn), driver
        except BaseException:
            await conn.close()
            raise


class _HotConnections:
    """Connections checked out of the engine's pool, kept for the next call.

    A checkout through ``AsyncEngine.connect()`` costs more than the round trip of
    an append (greenlet switches, events, a Connection object), so the world keeps
    the connections it used and hands them to the next call directly. At most
    ``limit`` are held; further callers queue here (not in SQLAlchemy's pool, where
    connections kept here would never reach them). They stay checked out of
    SQLAlchemy's pool (which still creates, limits and disposes of them) and go back
    to it once idle for ``idle`` seconds, or on ``close()``.
    """

    def __init__(self, engine: AsyncEngine, limit: int, idle: float = 2.0) -> None:
        self._engine = engine
        self._limit = max(1, limit)
        self._idle_for = idle
        self._held = 0
        self._idle: list[tuple[PoolProxiedConnection, float]] = []
        self._waiters: collections.deque[asyncio.Future[PoolProxiedConnection | None]] = (
            collections.deque()
        )
        self._timer: asyncio.TimerHandle | None = None
        self._chores: set[asyncio.Task[None]] = set()
        self._closed = False

    async def get(self) -> PoolProxiedConnection:
        if self._idle:
            return self._idle.pop()[0]
        if self._held >= self._limit:
            fut: asyncio.Future[PoolProxiedConnection | None] = (
                asyncio.get_running_loop().create_future()
            )
            self._waiters.append(fut)
            try:
                async with asyncio.timeout(_CHECKOUT_TIMEOUT):
                    await asyncio.shield(fut)
            except BaseException:
                if fut.done() and not fut.cancelled():
                    self._pass_on(fut.result())
                else:
                    fut.cancel()
                raise
            handed = fut.result()
            if handed is not None:
                return handed
        self._held += 1
        try:
            return await self._engine.raw_connection()
        except BaseException:
            self._pass_on(None)
            raise

    async def forget(self) -> None:
        """The world is used from another event loop (a second ``asyncio.run``): the
        connections kept belong to the old one, so drop them."""
        old_idle, self._idle = self._idle, []
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._waiters.clear()
        self._held = 0
        for fairy, _ in old_idle:
            await self.drop(fairy, counted=False)

    def put(self, fairy: PoolProxiedConnection) -> None:
        """Give a healthy connection back after a call."""
        if self._closed:
            self._pass_on(None)
            self._spawn(self._release(fairy))
            return
        self._pass_on(fairy)

    async def drop(self, fairy: PoolProxiedConnection, *, counted: bool = True) -> None:
        """Close a broken connection at once and invalidate it: the pool replaces it."""
        driver = fairy.driver_connection
        if driver is not None:
            with contextlib.suppress(Exception):
                driver.terminate()
        if counted:
            self._pass_on(None)
        with contextlib.suppress(Exception):
            await greenlet_spawn(fairy.invalidate)

    async def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        idle, self._idle = self._idle, []
        for fairy, _ in idle:
            self._held -= 1
            await self._release(fairy)
        for task in list(self._chores):
            with contextlib.suppress(BaseException):
                await task

    def _pass_on(self, fairy: PoolProxiedConnection | None) -> None:
        """Hand ``fairy`` (or, for None, the right to check out a new connection) to
        the first waiter; else keep ``fairy`` idle (or free the slot)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(fairy)
                return
        if fairy is None:
            self._held -= 1
            return
        self._idle.append((fairy, time.monotonic()))
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._idle_for, self._trim)

    def _trim(self) -> None:
        self._timer = None
        cutoff = time.monotonic() - self._idle_for
        while self._idle and self._idle[0][1] <= cutoff:
            fairy, _ = self._idle.pop(0)
            self._held -= 1
            self._spawn(self._release(fairy))
        if self._idle:
            self._timer = asyncio.get_running_loop().call_later(self._idle_for, self._trim)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)

    @staticmethod
    async def _release(fairy: PoolProxiedConnection) -> None:
        with contextlib.suppress(Exception):
            await greenlet_spawn(fairy.close)


class _Statements:
    """The SQL of one namespace, built once (asyncpg caches the prepared statements)."""

    def __init__(self, s: str) -> None:
        self.append = (
            f"SELECT o_seq, o_followed FROM {s}.fx_append_quiet($1, $2, $3, $4, $5, $6, $7, $8)"
        )
        self.notify = "SELECT pg_notify($1, sid) FROM unnest($2::text[]) AS sid"
        self.acquire = f"SELECT o_epoch, o_seq FROM {s}.fx_acquire($1)"
        self.read = (
            f"SELECT seq, kind, coalesce(raw, data::text), epoch, at FROM {s}.entries "
            "WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
        )
        # the reads of several followers in one statement: request i's slice, in order
        self.read_many = (
            "SELECT q.i, e.seq, e.kind, e.data, e.epoch, e.at "
            "FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS q(sid, after, i) "
            "CROSS JOIN LATERAL (SELECT seq, kind, coalesce(raw, data::text) AS data, "
            f"epoch, at FROM {s}.entries WHERE session_id = q.sid AND seq > q.after "
            "ORDER BY seq LIMIT $3) AS e ORDER BY q.i, e.seq"
        )
        self.wake = f"SELECT {s}.fx_wake($1, $2)"
        self.take = f"SELECT session_id, token, attempt, expires_at FROM {s}.fx_take_wakes($1, $2)"
        self.renew = f"SELECT {s}.fx_renew_wake($1, $2, $3)"
        self.finish = f"SELECT {s}.fx_finish_wake($1, $2)"
        self.delete = f"SELECT {s}.fx_delete($1)"
        self.last = (
            f"SELECT seq, kind, coalesce(raw, data::text), epoch, at FROM {s}.entries "
            "WHERE session_id = $1 ORDER BY seq DESC LIMIT 1"
        )
        # one statement, so one snapshot and all or nothing; the row lock of the
        # UPDATE orders it with appends (which lock the same row first)
        self.delete_if_idle = (
            f"WITH gone AS (UPDATE {s}.sessions SET epoch = epoch + 1, last_seq = 0 "
            "WHERE session_id = $1 AND last_seq = $2 "
            f"AND NOT EXISTS (SELECT 1 FROM {s}.wakes WHERE session_id = $1) "
            "RETURNING session_id, followers), "
            f"e AS (DELETE FROM {s}.entries WHERE session_id IN (SELECT session_id FROM gone)), "
            f"k AS (DELETE FROM {s}.keys WHERE session_id IN (SELECT session_id FROM gone)) "
            "SELECT followers > 0 FROM gone"
        )
        self.sessions = (
            f"SELECT session_id FROM {s}.sessions WHERE last_seq > 0 AND session_id > $1 "
            "ORDER BY session_id LIMIT $2"
        )
        # WakeLister: due is the pending request's time, else (taken, no request since)
        # the lease's end, when it is delivered again (W12); a lease that ran out holds
        # nothing, so it is shown as NULL
        wake_columns = (
            "SELECT session_id, coalesce(due, lease_until), "
            f"CASE WHEN lease_until > now() THEN lease_until END, attempt FROM {s}.wakes "
        )
        self.wake_state = wake_columns + "WHERE session_id = $1"
        self.wakes = wake_columns + "WHERE session_id > $1 ORDER BY session_id LIMIT $2"
        self.follow_add = (
            f"INSERT INTO {s}.follows (session_id, pid) SELECT unnest($1::text[]), "
            "pg_backend_pid() ON CONFLICT DO NOTHING"
        )
        self.follow_remove = (
            f"DELETE FROM {s}.follows WHERE session_id = $1 AND pid = pg_backend_pid()"
        )
        self.follow_drop_own = f"DELETE FROM {s}.follows WHERE pid = pg_backend_pid()"
        self.follow_gc = (
            f"DELETE FROM {s}.follows WHERE pid = pg_backend_pid() "
            "OR pid NOT IN (SELECT pid FROM pg_stat_activity)"
        )


async def _migrate(conn: AsyncConnection, namespace: str) -> None:
    """Apply the missing migrations of ``namespace`` in the caller's transaction."""
    s = _schema.qualified(namespace)
    await conn.execute(
        text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": _schema.lock_key(namespace)}
    )
    await conn.exec_driver_sql(f"CREATE SCHEMA IF NOT EXISTS {s}")
    await conn.exec_driver_sql(
        f"CREATE TABLE IF NOT EXISTS {s}.migrations (version integer PRIMARY KEY, "
        "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    result = await conn.exec_driver_sql(f"SELECT coalesce(max(version), 0) FROM {s}.migrations")
    current = int(result.scalar_one())
    if current > _schema.SCHEMA_VERSION:
        raise ConfigurationError(
            f"namespace {namespace!r} is at schema version {current}, newer than this "
            f"fxworld knows ({_schema.SCHEMA_VERSION}): upgrade fxworld"
        )
    for migration in _schema.MIGRATIONS:
        if migration.version <= current:
            continue
        for statement in _schema.migration_sql(migration, namespace):
            await conn.exec_driver_sql(statement)
        await conn.execute(
            text(f"INSERT INTO {s}.migrations (version, description) VALUES (:v, :d)"),
            {"v": migration.version, "d": migration.description},
        )


class _Listener:
    """One LISTEN connection per world: wakes local followers when an append to a
    session they follow commits. Records the followed sessions in ``follows`` (with
    its backend pid) so that appends notify only for those. Reconnects on loss;
    while it is down, followers poll quickly."""

    def __init__(self, world: PostgresWorld) -> None:
        self._world = world
        self._channel = _schema.channel_name(world.namespace)
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
        await self._locked(self._world._sql.follow_add, [sid])

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
        """A follower's read of up to ``_FOLLOW_PAGE`` entries after ``after``,
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
        world = self._world
        try:
            if len(reads) == 1:
                sid, after, _ = reads[0]
                results = [await world.read(sid, after, limit=_FOLLOW_PAGE)]
            else:
                rows = await world._call(
                    "follow",
                    "all",
                    world._sql.read_many,
                    [sid for sid, _, _ in reads],
                    [after for _, after, _ in reads],
                    _FOLLOW_PAGE,
                    idempotent=True,
                )
                results = [[] for _ in reads]
                for row in rows:
                    results[row[0] - 1].append(_entry(reads[row[0] - 1][0], row[1:]))
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
        timeout = self._world.follow_poll if self._connected.is_set() else 0.1
        event = self._events.setdefault(sid, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await event.wait()

    async def stop(self) -> None:
        if self._subs:  # still followed: take our rows out so appends stop notifying
            self._subs.clear()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    await self._locked(self._world._sql.follow_drop_own)
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
            await self._locked(self._world._sql.follow_remove, sid)

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
            close: _Closer | None = None
            try:
                close, driver = await self._world._driver_session(listen=True)
                self._lost.clear()
                driver.add_termination_listener(self._terminated)
                await driver.add_listener(self._channel, self._notified)
                async with self._lock:
                    await driver.execute(self._world._sql.follow_gc)
                    await driver.execute(self._world._sql.follow_add, list(self._subs))
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


class _Notifier:
    """Tells followers (in any process) of this world's appends to sessions they
    follow: one statement notifies every session appended to since the previous one
    was sent, on a connection of its own. An append's own commit carries no NOTIFY
    (PostgreSQL serialises the commits that notify), and while one is on its way the
    next ones gather, so a busy process sends about one per round trip. If a NOTIFY
    cannot be sent, followers still see the entries at their polling fallback."""

    _TRIES = 2

    def __init__(self, world: PostgresWorld) -> None:
        self._world = world
        self._channel = _schema.channel_name(world.namespace)
        self._pending: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._close: _Closer | None = None
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
        world = self._world
        if world.pooler == "transaction":  # no session to keep: NOTIFY with the calls
            await world._call("notify", "exec", world._sql.notify, self._channel, sids)
            return
        if self._driver is None or self._driver.is_closed():
            await self._drop()
            self._close, self._driver = await world._driver_session(listen=False)
            # a NOTIFY's commit need not wait for the disk: it carries
            # no data, only news of appends already durable
            await self._driver.execute("SET synchronous_commit TO off")
        await self._driver.execute(world._sql.notify, self._channel, sids)

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


_Closer = Callable[[], Awaitable[None]]


async def _discard(conn: AsyncConnection) -> None:
    """Close the listener's connection for good (it must not return to the pool
    still listening)."""
    await conn.invalidate()
    await conn.close()


def _engine_url(dsn: str) -> URL:
    try:
        url = make_url(dsn)
    except (ArgumentError, ValueError) as e:  # a port that is not a number, say
        raise unparseable(dsn, e) from None
    if url.drivername not in _SCHEMES:
        raise ConfigurationError(
            f"PostgresWorld takes postgresql://, postgres:// or postgresql+asyncpg:// URLs, "
            f"not {url.drivername}:// ({mask(dsn)})"
        )
    return url.set(drivername="postgresql+asyncpg")


def _own_options(url: str) -> tuple[str, dict[str, str]]:
    """Split fxworld's options (namespace, max_entry_bytes, pool_size, follow_poll,
    pooler, listen_url) off ``url``."""
    base, params = split_query(url)
    names = ("namespace", "max_entry_bytes", "pool_size", "follow_poll", "pooler", "listen_url")
    own: dict[str, str] = {k: params.pop(k) for k in names if k in params}
    if "pool_size" in own and not own["pool_size"].isdigit():
        raise ConfigurationError(f"pool_size must be an integer in {mask(url)}")
    if "follow_poll" in own and not _positive(own["follow_poll"]):
        raise ConfigurationError(f"follow_poll must be a positive number in {mask(url)}")
    if params:
        base += "?" + urlencode(params)
    return base, own


def _positive(value: str) -> bool:
    try:
        return 0 < float(value) < float("inf")
    except ValueError:
        return False


def _hot_limit(engine: AsyncEngine, pool_size: int) -> int:
    """How many connections the world keeps for its calls: its ``pool_size``, or the
    size of the application's pool (its overflow stays for the application and the
    world's listener)."""
    size = getattr(engine.sync_engine.pool, "size", None)
    return pool_size if not callable(size) else max(1, min(pool_size, int(size())))


def _check_lease(wake: WakeLease) -> None:
    validate.held(wake)  # W15: before any I/O


def _entry(session_id: str, row: Any) -> Entry:
    """An entry from a row ``(seq, kind, data as JSON text, epoch, at)``."""
    return Entry(session_id, row[0], _kind_in(row[1]), json.loads(row[2]), row[3], row[4])


def _jsonb_safe(data: str) -> bool:
    """Whether jsonb gives ``data`` back unchanged: it refuses ``\\u0000`` and turns
    floats with a positive exponent (``1e+23``) into integers."""
    return "\\u0000" not in data and "e+" not in data


_KIND_ESCAPE = re.compile(r"[\\\x00\ud800-\udfff]")
_KIND_UNESCAPE = re.compile(r"\\(\\|u[0-9a-f]{4})")


def _kind_out(kind: str) -> str:
    """A kind as stored: PostgreSQL text holds no NUL and no lone surrogate."""
    if _KIND_ESCAPE.search(kind) is None:
        return kind
    return _KIND_ESCAPE.sub(lambda m: "\\\\" if m[0] == "\\" else f"\\u{ord(m[0]):04x}", kind)


def _kind_in(stored: str) -> str:
    if "\\" not in stored:
        return stored
    return _KIND_UNESCAPE.sub(lambda m: "\\" if m[1] == "\\" else chr(int(m[1][1:], 16)), stored)
