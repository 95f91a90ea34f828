"""One integration object (a LangGraph saver, an Agents SDK session), usable from
any event loop, with async and sync methods.

A world's connections belong to the event loop that opened them; a world moves to
a new loop by itself once its old one is gone (a second ``asyncio.run``), but it
cannot serve two running loops at once. An object built once (at module level, as
the docs show) is called from many: under one ``asyncio.run`` after another, from
a thread running its own loop while the main thread runs another, from sync code
with no loop at all. :class:`LoopOwner` keeps one loop, the owner, on which every
call of the object runs:

- while one loop at a time calls it, that loop owns the world: a call runs where
  it is, at no cost. Once that loop is closed or stopped (the loop of an
  ``asyncio.run`` that returned), the next caller's loop takes over;
- once two loops call it at once (a second thread's loop, a sync call from a
  thread while a loop runs elsewhere), the object moves to a loop of its own, in a
  daemon thread, and stays there: the calls under way on the old owner finish
  there first, then every call, from any loop, is handed to the object's loop
  (``run_coroutine_threadsafe``, one hop between threads) and awaited. A caller's
  loop ending never cancels another caller's call;
- a sync call with no owner running (no loop at all, as ``graph.invoke`` in a
  script) runs on the object's own loop too, this thread waiting for it. From
  inside the owner itself a sync call raises ``RuntimeError`` (it would wait for
  itself), as the incumbents' savers do.

:meth:`LoopOwner.close` stops the object's own loop and its thread, if it started
one.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["LoopOwner"]

T = TypeVar("T")


class LoopOwner:
    """The event loop an object's world is used on (see the module).

    ``name``: the object's, for the error raised by a sync call from inside the
    owner and for the thread of its own loop. ``moved``: called on the new owner
    when the owner changes, once nothing runs on the old one any more, to drop
    what the object kept of it (futures, tasks); never for the first owner.
    """

    def __init__(self, name: str, moved: Callable[[], None] | None = None) -> None:
        self._name = name
        self._moved = moved
        self._loop: asyncio.AbstractEventLoop | None = None
        self._own: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._busy = 0  # calls running on the owner when it is a caller's loop
        self._idle: Future[None] | None = None  # done once they are over
        self._moving = False  # moved() is owed once they are over

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the owner (an async method's body)."""
        here = asyncio.get_running_loop()
        with self._lock:
            owner = self._loop
            if owner is None or (owner is not here and not _running(owner)):
                owner = self._adopt(here)
            elif owner is not here and owner is not self._own:
                owner = self._share()  # a second loop at once
            mine = owner is here and here is not self._own
            if mine:
                self._busy += 1
        if owner is not here:
            handed = asyncio.run_coroutine_threadsafe(self.run(coro), owner)
            return await asyncio.wrap_future(handed)
        if not mine:
            await self._settle()
        try:
            return await coro
        finally:
            if mine:
                self._done()

    def run_sync(self, coro: Coroutine[Any, Any, T], *, instead: str = "") -> T:
        """Run ``coro`` to completion on the owner from synchronous code (a sync
        method's body); ``instead`` names what to use from inside the owner."""
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        with self._lock:
            owner = self._loop
            if owner is not None and owner is here:
                coro.close()
                raise RuntimeError(
                    f"{self._name}: a synchronous method was called from inside the event "
                    "loop that uses it, where it would wait for itself; "
                    + (instead or "use the async methods")
                )
            if owner is None or not _running(owner):
                owner = self._adopt(self._own_loop())
            elif owner is not self._own:
                owner = self._share()
        return asyncio.run_coroutine_threadsafe(self.run(coro), owner).result()

    def close(self) -> None:
        """Stop the loop of the object's own, and its thread, if it started one (a
        later call starts another, or runs on the caller's loop)."""
        with self._lock:
            own, thread = self._own, self._thread
            self._own = self._thread = None
            if own is not None and self._loop is own:
                self._loop = None
        if own is not None and thread is not None:
            own.call_soon_threadsafe(own.stop)
            if thread is not threading.current_thread():
                thread.join()
                own.close()

    def _adopt(self, loop: asyncio.AbstractEventLoop) -> asyncio.AbstractEventLoop:
        """Make ``loop`` the owner, the old one being gone (under the lock)."""
        if self._loop is not None and self._loop is not loop and self._moved is not None:
            self._moved()
        self._loop, self._busy, self._idle, self._moving = loop, 0, None, False
        return loop

    def _share(self) -> asyncio.AbstractEventLoop:
        """Move to the object's own loop while the old owner runs (under the lock):
        its calls under way finish there first (:meth:`_settle`)."""
        own = self._own_loop()
        self._loop, self._moving = own, True
        if self._busy:
            self._idle = Future()
        return own

    async def _settle(self) -> None:
        """On the object's own loop: wait for the calls under way on the old owner,
        then drop what was kept of it, once."""
        idle = self._idle
        if idle is not None and not idle.done():
            await asyncio.wrap_future(idle)
        with self._lock:
            moving, self._moving = self._moving, False
        if moving and self._moved is not None:
            self._moved()

    def _done(self) -> None:
        """A call on a caller's loop is over."""
        with self._lock:
            self._busy -= 1
            if not self._busy and self._idle is not None and not self._idle.done():
                self._idle.set_result(None)

    def _own_loop(self) -> asyncio.AbstractEventLoop:
        """The object's own loop, running in a daemon thread (started if need be)."""
        if self._own is not None and _running(self._own):
            return self._own
        loop = asyncio.new_event_loop()
        started = threading.Event()
        loop.call_soon(started.set)
        thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
        thread.start()
        started.wait()
        self._own, self._thread = loop, thread
        return loop


def _running(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` can still run what is handed to it."""
    return loop.is_running() and not loop.is_closed()
