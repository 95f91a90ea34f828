"""Why a run cuts what it is doing short, and how a step is cut without a task.

Two signals reach a running session:

- **handover**: the worker is shutting down (SIGTERM, ``agent.stop()``). A running
  model call is abandoned at once (its text is marked discarded and the call is
  made again by the next worker); a running tool is let finish; then the run
  appends ``turn.yielded`` with a wake and releases its lease, so another worker
  continues at once.
- **stop**: a ``stop.requested`` for the current turn was seen (in what an append
  read of other writers, or by following the log while a slow step runs: see
  :mod:`fxworld.engine._run.stop_watch`). The model stream is cut (its saved text
  stays), no new tool starts, an async tool is cancelled, a sync one is let finish,
  and ``turn.stopped`` ends the turn.

A step that waits on something a signal must cut (the model's next event, an async
tool, a retry's backoff) waits inside :meth:`Signals.cutting`: raising the signal
cancels that wait, and the step sees :class:`Cut`. Nothing waits on the signals
themselves, so a quick step costs no task and no timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType
from typing import Any, Literal

__all__ = ["Signals", "Cut", "CutScope"]


class Cut(Exception):
    """A signal cut the wait short; ``handover`` tells which one (else: a stop)."""

    def __init__(self, handover: bool) -> None:
        super().__init__("handover" if handover else "stop")
        self.handover = handover


class Signals:
    """The signals of one run; see the module. ``handover`` starts raised when the
    worker is already shutting down."""

    def __init__(self, *, handover: bool = False) -> None:
        self.handover = handover
        """The worker is shutting down: hand the session back at the next boundary."""
        self.stop = False
        """A ``stop.requested`` for the current turn was seen."""
        self._listeners: list[Callable[[], None]] = []

    def hand_over(self) -> None:
        """Raise handover (the worker is shutting down)."""
        self.handover = True
        self._fire()

    def see_stop(self) -> None:
        """Raise stop (a ``stop.requested`` for the current turn landed)."""
        self.stop = True
        self._fire()

    def clear_stop(self) -> None:
        """The stop is in the state now (the turn ends): the next turn starts clear."""
        self.stop = False

    def _fire(self) -> None:
        for listener in list(self._listeners):
            listener()

    def cutting(self, *, handover: bool = True) -> CutScope:
        """A ``with`` block whose waits a signal cuts: stop, and handover too unless
        ``handover=False`` (a tool is let finish when the worker shuts down)."""
        return CutScope(self, handover)

    def listen(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def unlisten(self, listener: Callable[[], None]) -> None:
        self._listeners.remove(listener)


class CutScope:
    """See :meth:`Signals.cutting`: like ``asyncio.timeout``, but a signal, not a
    clock, cancels the current task's wait inside the block; the block then raises
    :class:`Cut` (at once if the signal is already raised on entry)."""

    def __init__(self, signals: Signals, handover: bool) -> None:
        self._signals = signals
        self._handover = handover
        self._task: asyncio.Task[Any] | None = None
        self._fired = False
        self._cancelled = False

    def _raised(self) -> bool:
        return self._signals.stop or (self._handover and self._signals.handover)

    def _cut(self) -> Cut:
        return Cut(self._handover and self._signals.handover)

    def __enter__(self) -> CutScope:
        if self._raised():
            raise self._cut()
        self._task = asyncio.current_task()
        self._signals.listen(self._fire)
        return self

    def _fire(self) -> None:
        if self._fired or not self._raised():
            return
        self._fired = True
        # From inside the block's own task (it raised the signal itself) there is
        # no wait to cancel: the block's end raises Cut.
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
            self._cancelled = True

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        self._signals.unlisten(self._fire)
        if not self._fired:
            return False
        assert self._task is not None
        if self._cancelled and self._task.uncancel() > 0 and exc_type is asyncio.CancelledError:
            return False  # cancelled from elsewhere too: that cancellation goes on
        raise self._cut() from None
