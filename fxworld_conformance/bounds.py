"""Every check's time bound: a check that runs past it fails, saying what it was
waiting for, and the kit goes on with the next one.

:func:`bounded` runs one check in a thread of its own and waits for it at most its
bound (``Target.check_timeout``, ``--check-timeout``, else the profile's bound for
its tier: :data:`fxworld_conformance.profiles.PROFILES`). When the bound passes, the
kit notes where each of the check's tasks waits, cancels them, gives the check
:data:`GRACE` seconds to end (close its worlds, kill its child processes), and
returns one failed row: it names what the check was waiting for (the world call in
flight as :func:`~fxworld_conformance.target.call_world` describes it, else the
method of the world it was in, else the line of the check) and where each task
waited. A check that ignores the cancel is left running in the background.

The kit's event loops run their work through :func:`watched` (the scenarios of the
directed and engine tiers, :func:`fxworld_conformance.cleanup.run_sync`, the state
machines' runner), which makes it known to the check's bound, so that the bound can
cancel it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import linecache
import math
import os
import sys
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

from fxworld.protocol import World
from fxworld_conformance.report import CheckResult
from fxworld_conformance.target import call_world

__all__ = ["Bound", "Waiting", "bounded", "watched", "seconds", "GRACE"]

T = TypeVar("T")

GRACE = 10.0
"""Seconds a check that ran past its bound has, once cancelled, to end; after that
the kit leaves it running in the background and goes on."""

WHY = "the check ran past its time bound"
"""The message of the cancel a bound sends."""

_CURRENT: contextvars.ContextVar[Bound | None] = contextvars.ContextVar(
    "fxworld_conformance_bound", default=None
)


class Bound:
    """The time bound of one check in flight: the tasks its event loops run
    (:func:`watched`). When it expires they are cancelled, once: what they do on
    the way out (close a world, kill child processes) still runs. When the check
    is abandoned (it did not end within :data:`GRACE`), every task is cancelled
    again, and every one it starts later at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self.abandoned = False
        self._lock = threading.Lock()
        self._runs: dict[asyncio.Task[Any], asyncio.AbstractEventLoop] = {}
        self._loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()

    def enter(self, task: asyncio.Task[Any], loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            self._runs[task] = loop
            self._loops.add(loop)
            abandoned = self.abandoned
        if abandoned:
            task.cancel(WHY)

    def leave(self, task: asyncio.Task[Any]) -> None:
        with self._lock:
            self._runs.pop(task, None)

    def expire(self) -> None:
        """Cancel the tasks of the check (once)."""
        with self._lock:
            runs = [] if self.expired else list(self._runs.items())
            self.expired = True
        _cancel(runs)

    def abandon(self) -> None:
        """Cancel the tasks of the check again, and every one it starts later."""
        with self._lock:
            runs = list(self._runs.items())
            self.expired = self.abandoned = True
        _cancel(runs)

    def tasks(self) -> list[asyncio.Task[Any]]:
        """The check's pending tasks: those it runs through :func:`watched` first,
        then the other tasks of their event loops."""
        with self._lock:
            mains = list(self._runs)
            loops = list(self._loops)
        others: list[asyncio.Task[Any]] = []
        for loop in loops:
            if not loop.is_closed():
                with contextlib.suppress(RuntimeError):
                    others += [t for t in asyncio.all_tasks(loop) if t not in mains]
        return [t for t in mains if not t.done()] + others


def _cancel(runs: list[tuple[asyncio.Task[Any], asyncio.AbstractEventLoop]]) -> None:
    for task, loop in runs:
        with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
            loop.call_soon_threadsafe(task.cancel, WHY)


async def watched(aw: Awaitable[T]) -> T:
    """Await ``aw``, known to the bound of the check that runs it (if any), which
    cancels it when the check runs past its bound."""
    bound = _CURRENT.get()
    task = asyncio.current_task()
    if bound is None or task is None:
        return await aw
    bound.enter(task, asyncio.get_running_loop())
    try:
        return await aw
    finally:
        bound.leave(task)


def seconds(text: str) -> float:
    """A time bound given as text (``--check-timeout``): a number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"not a number of seconds > 0: {text!r}")
    return value


def bounded(
    name: str, blame: tuple[str, ...], seconds: float, check: Callable[[], list[CheckResult]]
) -> list[CheckResult]:
    """Run ``check`` (one check, named ``name``) in a thread of its own for at most
    ``seconds``: its rows, or one failed row saying what it waited for, blaming the
    guarantee of the world call in flight or else ``blame``. A Ctrl-C cancels the
    check and waits for it to end (a second one does not wait), then raises
    ``KeyboardInterrupt``."""
    bound = Bound(seconds)
    box: dict[str, Any] = {}
    done = threading.Event()

    def body() -> None:
        _CURRENT.set(bound)
        try:
            box["rows"] = check()
        except BaseException as e:
            box["error"] = e
        finally:
            done.set()

    started = time.monotonic()
    thread = threading.Thread(target=body, name=f"fxworld conformance: {name}", daemon=True)
    thread.start()
    try:
        if not done.wait(seconds):
            waiting = Waiting.of(bound, thread)
            if not done.is_set():
                bound.expire()
                cancelled = time.monotonic()
                ended = done.wait(GRACE)
                if not ended:
                    bound.abandon()
                return [
                    waiting.row(
                        name, blame, seconds, time.monotonic() - cancelled if ended else None,
                        time.monotonic() - started,
                    )
                ]  # fmt: skip
    except KeyboardInterrupt:
        bound.expire()
        try:
            done.wait()
        except KeyboardInterrupt:  # a second Ctrl-C does not wait
            bound.abandon()
        raise
    if "error" in box:
        raise box["error"]
    rows: list[CheckResult] = box["rows"]
    return rows


@dataclass(frozen=True)
class Waiting:
    """What a check that ran past its bound was waiting for, and where."""

    what: str
    """What it waited for, as the end of "it was waiting ...": ``for`` the world
    call in flight, ``in`` the method of the world, or ``at`` the line of the check."""
    guarantee: str | None
    """The guarantee the world call in flight is made for, when the kit knows it."""
    where: list[str]
    """Each task's calls, outermost first, then the thread's own when no task
    waited."""

    @classmethod
    def of(cls, bound: Bound, thread: threading.Thread) -> Waiting:
        chains = [_ours(_awaiting(task.get_coro())) for task in bound.tasks()]
        chains = [c for c in chains if c]
        where = [
            f"  task {i + 1}:\n" + "\n".join(f"    {_line(f)}" for f in chain)
            for i, chain in enumerate(chains)
        ]
        stack = _ours(_stack(sys._current_frames().get(thread.ident or -1)))
        if stack and not chains:
            where.append("  the check's thread:\n" + "\n".join(f"    {_line(f)}" for f in stack))
        for chain in chains:  # the world call the kit made, as it describes it
            for frame in reversed(chain):
                if frame.f_code is call_world.__code__:
                    local = frame.f_locals
                    return cls(f"for {local.get('what')}", str(local.get("guarantee")), where)
        for chain in chains:  # a method of the world under test
            for frame in reversed(chain):
                if isinstance(frame.f_locals.get("self"), World):
                    name = frame.f_code.co_qualname
                    return cls(f"in the world's {name}() ({_place(frame)})", None, where)
        innermost = chains[0][-1] if chains else stack[-1] if stack else None
        what = f"at {_line(innermost)}" if innermost is not None else "for nothing the kit saw"
        return cls(what, None, where)

    def row(
        self,
        name: str,
        blame: tuple[str, ...],
        seconds: float,
        ended: float | None,
        took: float,
    ) -> CheckResult:
        """The failed row of the check ``name``: what it waited for first."""
        then = (
            f"It was cancelled then and ended {ended:.1f} s later."
            if ended is not None
            else f"It was cancelled then and had not ended {GRACE:g} s later: "
            "it is left running in the background."
        )
        where = "\n".join(self.where) or "  (no task of the check was waiting)"
        return CheckResult(
            name=name,
            guarantees=(self.guarantee,) if self.guarantee else blame,
            status="failed",
            detail=f"did not finish within {seconds:g} s (its time bound); it was waiting "
            f"{self.what}\n{then}\nWhere it waited (outermost call first):\n{where}",
            seconds=took,
            extra={"time_bound": seconds, "waiting_for": self.what, "ended": ended is not None},
        )


def _awaiting(coro: object) -> list[FrameType]:
    """The frames of a suspended coroutine and of what it awaits, outermost first."""
    frames: list[FrameType] = []
    for _ in range(500):
        if coro is None:
            break
        frame = next(
            (f for a in ("cr_frame", "gi_frame", "ag_frame") if (f := getattr(coro, a, None))),
            None,
        )
        if isinstance(frame, FrameType):
            frames.append(frame)
        coro = next(
            (c for a in ("cr_await", "gi_yieldfrom", "ag_await") if (c := getattr(coro, a, None))),
            None,
        )
    return frames


def _stack(frame: FrameType | None) -> list[FrameType]:
    """A running thread's frames, outermost first."""
    frames: list[FrameType] = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames[::-1]


_STDLIB = os.path.dirname(os.__file__) + os.sep
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _ours(frames: list[FrameType]) -> list[FrameType]:
    """The frames of the kit, the world and the engine: no standard library, no
    frame of this module."""

    def standard(path: str) -> bool:
        return path.startswith(_STDLIB) and "site-packages" not in path

    here = os.path.abspath(__file__)
    return [
        f
        for f in frames
        if not standard(f.f_code.co_filename) and os.path.abspath(f.f_code.co_filename) != here
    ]


def _place(frame: FrameType) -> str:
    """``path:line`` of a frame, the path from the kit's root."""
    path = frame.f_code.co_filename
    return f"{path[len(_ROOT) :] if path.startswith(_ROOT) else path}:{frame.f_lineno}"


def _line(frame: FrameType) -> str:
    """Where a frame is, in what, and its line of source."""
    source = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    return f"{_place(frame)} in {frame.f_code.co_qualname}: {source}"
