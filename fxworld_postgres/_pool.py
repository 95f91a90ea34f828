"""The connections a world's calls run on, and the one way a call reaches the server.

``HotConnections`` keeps the connections the world used, checked out of
SQLAlchemy's pool, for the next call; ``Calls.run`` sends one statement on one of
them (one round trip), retries what ``_errors.retry_safe`` allows and translates
every other error (W16). ``own_connection`` opens a connection held outside the
calls' share of the pool, for the listener and the notifier (``_listen``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Literal

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util import greenlet_spawn

from fxworld_postgres import _errors, _pooler

__all__ = ["Calls", "Closer", "Fetch", "HotConnections", "hot_limit", "own_connection"]

RETRIES = 3
BACKOFF = (0.05, 0.2, 0.5)
MAX_STALE = 64  # pooled connections found closed in one call: discarded, not attempts
CHECKOUT_TIMEOUT = 30.0
Fetch = Literal["val", "row", "all", "exec"]
_DRIVER_METHOD: dict[Fetch, str] = {
    "val": "fetchval",
    "row": "fetchrow",
    "all": "fetch",
    "exec": "execute",
}
Closer = Callable[[], Awaitable[None]]


class Calls:
    """The one way to the server: each call runs one statement on a kept
    connection's asyncpg driver, one round trip.

    ``setup`` is the world's ``setup()``: a world used without it sets its namespace
    up on the first call that finds it missing, once (``set_up`` says it ran).
    """

    def __init__(self, hot: HotConnections, setup: Callable[[], Awaitable[None]]) -> None:
        self.hot = hot
        self.set_up = False
        self._setup = setup

    async def run(
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
        """Run ``sql``, fetching as ``fetch`` says. Retries what
        ``_errors.retry_safe`` allows, then translates the error."""
        attempt = 0
        stale = 0
        while True:
            sent = False
            try:
                fairy = await self.hot.get()
                driver = fairy.driver_connection
                if driver is None or driver.is_closed():
                    await self.hot.drop(fairy)
                    raise _errors.NotSent()
                sent = True
                return await self._send(fairy, driver, fetch, sql, args)
            except Exception as e:
                if isinstance(e, _errors.NotSent) and stale < MAX_STALE:
                    stale += 1
                    continue
                if not self.set_up and _errors.not_set_up(e):
                    await self._setup()  # a world used without setup(): once, then again
                    continue
                if attempt + 1 < RETRIES and _errors.retry_safe(
                    e, sent=sent, idempotent=idempotent
                ):
                    await asyncio.sleep(BACKOFF[attempt])
                    attempt += 1
                    continue
                raise _errors.translate(
                    e, what=what, session_id=session_id, epoch=epoch, expected=expected
                ) from None

    async def _send(
        self,
        fairy: PoolProxiedConnection,
        driver: asyncpg.Connection,
        fetch: Fetch,
        sql: str,
        args: tuple[Any, ...],
    ) -> Any:
        """One statement on ``fairy``; the connection goes back to the kept ones,
        or is dropped when the error says it broke."""
        try:
            result = await getattr(driver, _DRIVER_METHOD[fetch])(sql, *args)
        except BaseException as e:
            if _errors.connection_broken(e):
                await asyncio.shield(self.hot.drop(fairy))
            else:
                self.hot.put(fairy)
            raise
        self.hot.put(fairy)
        return result


class HotConnections:
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
                async with asyncio.timeout(CHECKOUT_TIMEOUT):
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


async def own_connection(
    engine: AsyncEngine, listen_dsn: str | None, *, listen: bool
) -> tuple[Closer, asyncpg.Connection]:
    """A connection of its own, held outside the calls' share of the pool (the
    listener's, the notifier's), and how to close it for good: for the listener,
    a direct one to ``listen_dsn`` when one is given, else one of the engine's."""
    if listen and listen_dsn is not None:
        try:
            driver = await _pooler.listen(listen_dsn)
        except Exception as e:
            raise _errors.translate(e, what="listen") from None
        return driver.close, driver
    conn = await engine.connect()
    try:
        driver = (await conn.get_raw_connection()).driver_connection
        assert driver is not None
        return lambda: _discard(conn), driver
    except BaseException:
        await conn.close()
        raise


async def _discard(conn: AsyncConnection) -> None:
    """Close a connection of its own for good (the listener's must not return to
    the pool still listening)."""
    await conn.invalidate()
    await conn.close()


def hot_limit(engine: AsyncEngine, pool_size: int) -> int:
    """How many connections the world keeps for its calls: its ``pool_size``, or the
    size of the application's pool (its overflow stays for the application and the
    world's listener)."""
    size = getattr(engine.sync_engine.pool, "size", None)
    return pool_size if not callable(size) else max(1, min(pool_size, int(size())))
