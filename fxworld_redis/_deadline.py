"""Each world call's deadline, kept by one sweep per second for all calls.

A stalled link must end a call (W16), but a timer per call (``asyncio.timeout``)
costs about 9 µs on every append, and redis-py's ``socket_timeout`` costs a task
per command. Calls register here instead; one callback per second cancels those
past their deadline, and their callers see ``TimeoutError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["Deadlines"]

T = TypeVar("T")
_SWEEP_EVERY = 1.0  # s: how late a deadline may be seen


class Deadlines:
    """The deadlines of the calls running on one event loop."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._loop = asyncio.get_running_loop()
        self._due: dict[asyncio.Task[Any], float] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._sweep: asyncio.TimerHandle | None = None

    async def run(self, call: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``await call(*args)``, raising ``TimeoutError`` once it has run ``seconds``."""
        task = asyncio.current_task()
        if task is None or task in self._due:  # a call within a call: the outer deadline
            return await call(*args)
        self._due[task] = self._loop.time() + self._seconds
        if self._sweep is None:
            self._sweep = self._loop.call_later(_SWEEP_EVERY, self._cancel_late)
        try:
            result = await call(*args)
        except BaseException as e:
            if self._forget(task) and isinstance(e, asyncio.CancelledError):
                raise TimeoutError(f"no reply within {self._seconds:g} s") from None
            raise
        self._forget(task)
        return result

    def _forget(self, task: asyncio.Task[Any]) -> bool:
        """Drop the task's deadline; True if it expired and nobody else cancelled it."""
        del self._due[task]
        if task not in self._expired:
            return False
        self._expired.discard(task)
        return task.uncancel() == 0

    def _cancel_late(self) -> None:
        now = self._loop.time()
        for task, due in self._due.items():
            if due <= now and task not in self._expired:
                self._expired.add(task)
                task.cancel()
        self._sweep = self._loop.call_later(_SWEEP_EVERY, self._cancel_late) if self._due else None
