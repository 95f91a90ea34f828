"""The one thread that owns an embedded SQLite world's connection (its calls run
there, in order) and the world's finalizer that stops it."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["SqliteThread", "release"]

T = TypeVar("T")


class SqliteThread:
    """The one thread that owns a world's SQLite connection and runs its calls in
    order, handing each result back to the caller's event loop.

    Leaner than ``run_in_executor`` (no concurrent.futures round trip), which
    matters at thousands of calls a second. A daemon thread: a world that is never
    closed does not keep the process alive, and a write cut by exit is rolled back
    by SQLite like any crash.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[
            tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[[], Any]] | None
        ] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._main, name="fxworld-sqlite", daemon=True)
        self._thread.start()

    def submit(self, loop: asyncio.AbstractEventLoop, fn: Callable[[], T]) -> asyncio.Future[T]:
        fut: asyncio.Future[T] = loop.create_future()
        self._queue.put((loop, fut, fn))
        return fut

    def stop(self) -> None:
        self._queue.put(None)

    def _main(self) -> None:
        while (item := self._queue.get()) is not None:
            self._handle(*item)
            # Hold nothing of a finished call while idle (it may be the last
            # reference to its world, whose finalizer stops this thread).
            del item

    @staticmethod
    def _handle(
        loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Any], fn: Callable[[], Any]
    ) -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = fn()
        except BaseException as e:
            error = e
        try:
            loop.call_soon_threadsafe(settle_future, fut, result, error)
        except RuntimeError:  # the caller's loop is closed: nobody to tell
            pass


def settle_future(fut: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if fut.done():  # the caller was cancelled
        return
    if error is None:
        fut.set_result(result)
    else:
        fut.set_exception(error)


def release(worker: SqliteThread, held: list[sqlite3.Connection]) -> None:
    """A world's finalizer: stop its thread, close its connection (closing a closed
    one is a no-op; the connection is not tied to a thread)."""
    worker.stop()
    for conn in held:
        with contextlib.suppress(sqlite3.Error):
            conn.close()
