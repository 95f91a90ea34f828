"""PostgresWorld: see the package docstring for URL, options and capabilities."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlencode

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from fxworld import validate
from fxworld.errors import ConfigurationError
from fxworld.follow import poll_follow
from fxworld.types import Entry, Fence, NewEntry, WakeLease, WakeState
from fxworld.urls import mask, split_query, unparseable
from fxworld_postgres import _errors, _pooler, _schema
from fxworld_postgres._listen import Listener, Notifier
from fxworld_postgres._pool import (
    BACKOFF,
    RETRIES,
    Calls,
    Fetch,
    HotConnections,
    hot_limit,
    own_connection,
)
from fxworld_postgres._statements import (
    FOLLOW_PAGE,
    LARGEST_ENTRY,
    Statements,
    entry,
    jsonb_safe,
    kind_out,
)

__all__ = ["PostgresWorld"]

_SCHEMES = {"postgresql", "postgres", "postgresql+asyncpg"}


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
        self.max_entry_bytes = validate.max_entry_bytes(  # W15
            max_entry_bytes, largest=LARGEST_ENTRY, why="PostgreSQL's 1 GiB field"
        )
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
        self._sql = Statements(_schema.qualified(self.namespace))
        self._hot = HotConnections(self._engine, hot_limit(self._engine, pool_size))
        self._calls = Calls(self._hot, self.setup)
        self._listener: Listener | None = None
        self._notifier = self._new_notifier()
        self.connection_budget = _pooler.budget(pool_size)
        """The most server connections this world opens at once (an engine given
        brings its own pool's limits)."""
        self._closed = False
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
            self._notifier = self._new_notifier()
            if self._owns_engine:
                await self._engine.dispose(close=False)
        self._loop = loop

    async def setup(self) -> None:
        """Create or migrate this namespace's schema. Idempotent; safe from several
        processes at once (a transaction-scoped advisory lock serialises them).
        Calls at once in one process share one run: one connection (the budget)."""
        await self._on_this_loop()
        self._calls.set_up = True
        running = self._setting_up
        if running is None or running.done():
            running = self._setting_up = asyncio.ensure_future(self._setup())
        await asyncio.shield(running)

    async def _setup(self) -> None:
        await self._schema_change(_schema.migrate, what="setup")

    async def _schema_change(
        self, change: Callable[[AsyncConnection, str], Awaitable[None]], *, what: str
    ) -> None:
        """``change(conn, namespace)`` in one transaction, retried while that is safe
        (both callers are idempotent: a migration and a schema drop)."""
        for attempt in range(RETRIES):
            try:
                async with self._engine.begin() as conn:
                    await change(conn, self.namespace)
                return
            except Exception as e:
                if attempt + 1 < RETRIES and _errors.retry_safe(e, sent=True, idempotent=True):
                    await asyncio.sleep(BACKOFF[attempt])
                    continue
                raise _errors.translate(e, what=what) from None

    async def drop_namespace(self) -> None:
        """Drop the schema ``fxworld_<namespace>`` with everything in it, in one
        transaction (``fxworld.protocol.NamespaceDropper``); other schemas and the
        database stay. A transaction of another connection that still holds one
        of its tables is waited for at most ``_schema.DROP_LOCK_TIMEOUT``."""
        await self._on_this_loop()
        if self._listener is not None:  # its follows rows go with the schema
            await self._listener.stop()
            self._listener = None
        await self._schema_change(_schema.drop, what="drop_namespace")

    async def close(self) -> None:
        """Stop the listener and, if this world created it, dispose of the engine."""
        if self._closed:
            return
        self._closed = True
        await self._on_this_loop()
        running = self._setting_up
        if running is not None and not running.done():
            # a setup() whose caller was cancelled runs on (shielded): let its
            # transaction end before the pool goes, or its locks outlive the close
            with contextlib.suppress(Exception):
                await running
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
        kinds = [kind_out(kind) for kind, _ in encoded]
        datas: list[str | None] = []
        raws: list[str | None] | None = None
        for i, (_, data) in enumerate(encoded):
            if jsonb_safe(data):
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
        return [entry(session_id, row) for row in rows]

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
        listener = self._listener_for_loop()
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
        return await self.read(session_id, after, limit=FOLLOW_PAGE)

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

    # -- AgentRouter (W19): the owner of each session; each agent takes its own ---------

    async def claim(self, session_id: str, agent: str) -> str:
        """Record ``agent`` as the session's owner unless one is: one statement
        under the session row's lock; a retry returns the owner recorded."""
        validate.session_id(session_id)
        name = validate.agent_name(agent)
        owner = await self._call(
            "claim", "val", self._sql.claim, session_id, name, idempotent=True,
            session_id=session_id,
        )  # fmt: skip
        return str(owner)

    async def owner(self, session_id: str) -> str | None:
        validate.session_id(session_id)
        found = await self._call("owner", "val", self._sql.owner, session_id, idempotent=True)
        return None if found is None else str(found)

    async def take_wakes_for(self, agent: str, *, lease: float, limit: int = 10) -> list[WakeLease]:
        """As :meth:`take_wakes`, of ``agent``'s sessions and of nobody's: one
        statement, by the index on ``(agent, ready_at)``."""
        name = validate.agent_name(agent)
        seconds = validate.lease(lease)
        limit = validate.wake_batch(limit)
        rows = await self._call("take_wake", "all", self._sql.take_for, name, seconds, limit)
        return [WakeLease(r[0], r[1], int(r[2]), r[3], r[4]) for r in rows]

    async def rename_agent(self, old: str, new: str) -> int:
        """Give every session of agent ``old`` to agent ``new``; how many moved."""
        was, now = validate.agent_name(old), validate.agent_name(new)
        moved = await self._call("rename_agent", "val", self._sql.rename, was, now)
        return int(moved)

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
        return WakeLease(wake.session_id, wake.token, wake.attempt, until, wake.agent)

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
        return None if row is None else entry(session_id, row)

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

    # -- the one way to the server (``_pool.Calls``) ------------------------------------

    async def _call(
        self,
        what: str,
        fetch: Fetch,
        sql: str,
        *args: Any,
        idempotent: bool = False,
        session_id: str | None = None,
        epoch: int | None = None,
        expected: int | None = None,
    ) -> Any:
        if self._loop is not asyncio.get_running_loop():
            await self._on_this_loop()
        return await self._calls.run(
            what,
            fetch,
            sql,
            *args,
            idempotent=idempotent,
            session_id=session_id,
            epoch=epoch,
            expected=expected,
        )

    def _listener_for_loop(self) -> Listener:
        if self._listener is None:
            self._listener = Listener(
                self._sql,
                self._calls,
                functools.partial(own_connection, self._engine, self._listen_dsn, listen=True),
                channel=_schema.channel_name(self.namespace),
                poll=self.follow_poll,
            )
        return self._listener

    def _new_notifier(self) -> Notifier:
        return Notifier(
            self._sql,
            self._calls,
            functools.partial(own_connection, self._engine, None, listen=False),
            channel=_schema.channel_name(self.namespace),
            pooled=self.pooler == "transaction",
        )


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


def _check_lease(wake: WakeLease) -> None:
    validate.held(wake)  # W15: before any I/O
