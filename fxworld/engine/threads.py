"""A tool call's sync functions in threads, and what a cut leaves running.

A sync tool, and a sync function given to ``ctx.step``, runs in a thread of the
loop's default pool. Python cannot stop a thread: when its call is cut while the
thread runs (the tool's ``timeout``, the user's stop, the worker replaced), the
thread runs on, and its effects may still happen. :class:`CallThreads` says so
instead of hiding it:

- a thread whose call is cut before it started never runs its function;
- a running one is *left running*: :attr:`CallThreads.left_running` names it
  (``"tool:<name>"`` for a sync tool's own function, ``"step:<name>"`` for a
  step's), so the entry that closes the call says so (its ``running`` field) and
  the model hears that the work was NOT stopped and may still complete
  (:mod:`fxworld.engine.cut_notes`);
- when a left-running thread ends, what it returned or raised is a :class:`Late`
  outcome: logged (``fxworld.worker``, WARNING) and handed to ``on_late`` (the
  worker saves it as ``tool.late``); the thread waits for that save (at most
  :data:`LATE_SAVE_WAIT` seconds). A worker that stops waits for such threads
  (:func:`settle_left_running`) before it closes its world, so their outcomes are
  saved.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["CallThreads", "Late", "OnLate", "LATE_SAVE_WAIT", "settle_left_running"]

logger = logging.getLogger("fxworld.worker")

LATE_SAVE_WAIT = 30.0
"""Seconds a left-running thread that ended waits for its outcome to be saved."""


@dataclass(frozen=True)
class Late:
    """What a thread left running by its call's cut returned (``value``) or raised
    (``error``), once it ended."""

    part: str
    """``"tool:<name>"`` (a sync tool's function) or ``"step:<name>"`` (a step's)."""
    value: Any = None
    error: BaseException | None = None

    @property
    def step(self) -> str | None:
        """The step's name, for a step's function (else ``None``)."""
        kind, _, name = self.part.partition(":")
        return name if kind == "step" else None


OnLate = Callable[[Late], Awaitable[None]]
"""Saves a late outcome (the worker's: a ``tool.late`` entry)."""


class _Thread:
    """One function's run in a thread; its fields change under the calls' lock."""

    __slots__ = ("cut", "error", "finished", "part", "settled", "started", "value")

    def __init__(self, part: str) -> None:
        self.part = part
        self.started = self.finished = self.cut = False
        self.value: Any = None
        self.error: BaseException | None = None
        self.settled: asyncio.Future[None] | None = None
        """Left running: done once it ended and its outcome was saved (or not)."""

    def late(self) -> Late:
        return Late(self.part, self.value, self.error)


_UNSETTLED: set[asyncio.Future[None]] = set()
"""The :attr:`_Thread.settled` futures not done yet, of every loop."""


async def settle_left_running() -> int:
    """Wait until every thread that a cut call left running on this loop has ended
    and its outcome is saved (a worker that stops, before it closes its world); the
    number waited for."""
    loop = asyncio.get_running_loop()
    mine = [f for f in list(_UNSETTLED) if f.get_loop() is loop]
    if mine:
        logger.info(
            "waiting for %d thread(s) that cut calls left running (a thread cannot be "
            "stopped), to save their outcomes",
            len(mine),
        )
        await asyncio.gather(*mine, return_exceptions=True)
    return len(mine)


class CallThreads:
    """The threads of one tool call; see the module. ``on_late``: where a late
    outcome is saved (``None``: it is only logged)."""

    def __init__(self, on_late: OnLate | None = None) -> None:
        self.on_late = on_late
        self._lock = threading.Lock()
        self._left: list[_Thread] = []
        self._saving: set[asyncio.Task[None]] = set()

    @property
    def left_running(self) -> list[str]:
        """The parts of the call a cut left running in a thread, in cut order."""
        with self._lock:
            return [t.part for t in self._left]

    async def run(self, part: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in a thread (with this task's context vars, as
        ``asyncio.to_thread``); a cut of the await leaves it running (or, not
        started yet, never runs it)."""
        loop = asyncio.get_running_loop()
        t = _Thread(part)
        context = contextvars.copy_context()
        body = functools.partial(self._body, loop, t, context.run, fn, args, kwargs)
        try:
            return await loop.run_in_executor(None, body)
        except asyncio.CancelledError:
            self._cut(loop, t)
            raise

    def _body(
        self,
        loop: asyncio.AbstractEventLoop,
        t: _Thread,
        run: Callable[..., Any],
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """In the thread: run ``fn`` unless its call was cut first."""
        with self._lock:
            if t.cut:
                return None
            t.started = True
        try:
            value = run(fn, *args, **kwargs)
        except BaseException as e:
            self._end(loop, t, None, e, run)
            raise
        self._end(loop, t, value, None, run)
        return value

    def _end(
        self,
        loop: asyncio.AbstractEventLoop,
        t: _Thread,
        value: Any,
        error: BaseException | None,
        run: Callable[..., Any],
    ) -> None:
        """In the thread, as ``fn`` ended: a call cut meanwhile gets its outcome
        saved, and the thread waits for that."""
        with self._lock:
            t.finished, t.value, t.error = True, value, error
            late = t.cut
        if not late:
            return
        run(_log, t)  # (in the call's context: the line carries its session)
        coro = self._settle(t)
        try:
            future = asyncio.run_coroutine_threadsafe(coro, loop)
        except RuntimeError:  # the loop is closed: the worker has ended
            coro.close()
            logger.warning("%s: its late outcome was not saved: the loop has ended", t.part)
            return
        try:
            future.result(timeout=LATE_SAVE_WAIT)
        except Exception as e:  # (the loop stopped, or too slow)
            future.cancel()
            logger.warning("%s: its late outcome was not saved: %r", t.part, e)

    def _cut(self, loop: asyncio.AbstractEventLoop, t: _Thread) -> None:
        """On the loop: the await of ``t`` was cut."""
        with self._lock:
            t.cut = True
            if not t.started:
                return  # it never runs
            self._left.append(t)
            t.settled = loop.create_future()
            done = t.finished
        _UNSETTLED.add(t.settled)
        t.settled.add_done_callback(_UNSETTLED.discard)
        if done:  # it ended as the cut came: its outcome is late all the same
            _log(t)
            task = loop.create_task(self._settle(t))
            self._saving.add(task)
            task.add_done_callback(self._saving.discard)

    async def _settle(self, t: _Thread) -> None:
        """Save ``t``'s late outcome (if there is somewhere to), then mark it settled."""
        try:
            if self.on_late is not None:
                await self.on_late(t.late())
        except Exception:
            logger.warning("%s: its late outcome was not saved", t.part, exc_info=True)
        finally:
            if t.settled is not None and not t.settled.done():
                t.settled.set_result(None)


def _log(t: _Thread) -> None:
    how = f"raised {type(t.error).__name__}" if t.error is not None else "returned"
    logger.warning(
        "%s ended in its thread after its call was cut (timeout or stop): it %s", t.part, how
    )
