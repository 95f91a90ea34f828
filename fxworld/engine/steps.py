"""Durable steps inside a tool: ``await ctx.step(name, fn, *args, **kwargs)``.

A step runs ``fn`` once and saves its result in the session's log before
returning it: ``step.started`` is appended (fenced) before ``fn`` runs and
``step.finished`` with its JSON result after. When a ``@tool(resumable=True)``
call is run again after a crash (same ``execution_id``), a step whose
``step.finished`` is saved returns that result without running; a step that
started but did not finish runs again if it was marked ``idempotent=True``, and
otherwise raises :class:`StepInterrupted`, which the tool may catch.

A step is awaited or it is an error, seen at once: ``ctx.step`` called from a sync
tool (it runs in a thread, where nothing can await) raises
:class:`~fxworld.errors.InvalidArgument` there, and a ``ctx.step(...)`` whose
coroutine was never awaited when the tool returned makes the call fail with an
error naming the step (:meth:`StepJournal.check`), instead of a success whose
effect never ran.

What the log cannot save is refused with :class:`~fxworld.errors.InvalidArgument`:
a step name, before ``fn`` runs; a result (not JSON, a tuple, a key that is not a
string, NaN, or over the world's entry limit) only once ``fn`` has run, so its
``step.finished`` is saved with ``error`` instead of ``result``: the effect that ran
is never lost, and a resume raises the same error without running it again.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Coroutine, Mapping, Set
from typing import Any, Protocol

from fxworld.errors import InvalidArgument, InvalidEntry, WorldError

from . import log
from .unsaved import step_refused, why_refused

__all__ = ["StepInterrupted", "StepJournal", "StepLog", "StepCall", "step_key"]


class StepInterrupted(WorldError):
    """A non-idempotent step of this call was started before a crash and did not
    finish: it may have partly run, so it is not run again."""

    def __init__(self, name: str, key: str) -> None:
        super().__init__(
            f"step {name!r} (key {key}) was started before a crash and did not finish; "
            "it may have partly run, and is not run again (mark it idempotent=True to re-run)"
        )
        self.name = name
        self.key = key


def step_key(execution_id: str, name: str) -> str:
    """The stable key of step ``name`` of a call: the same on every run of the call."""
    return f"{execution_id}:{name}"


class StepLog(Protocol):
    """Where a step's entries go: the run's fenced writer."""

    async def append(self, entries: Any, *, wake: float | None = None) -> int: ...


class StepCall(Protocol):
    """What the steps of a call read of it: the call as the log tells it so far
    (:class:`~fxworld.engine.replay.CallState` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def execution_id(self) -> str: ...
    @property
    def step_results(self) -> Mapping[str, Any]:
        """The steps that finished, each with its saved result."""

    @property
    def steps_started(self) -> Set[str]:
        """The steps whose ``step.started`` is in the log."""

    @property
    def step_errors(self) -> Mapping[str, str]:
        """The steps that finished with a result the log could not keep, each with
        the error saved in its place."""


class StepJournal:
    """The steps of one running call: what the log already holds for it, and
    which names this run used (a name is used once per call)."""

    def __init__(self, writer: StepLog, call: StepCall) -> None:
        self.writer = writer
        self.call = call
        self.used: set[str] = set()
        self.issued: list[tuple[str, Coroutine[Any, Any, Any]]] = []
        """Each ``ctx.step`` made, with its coroutine (awaited or not)."""
        self.misused: InvalidArgument | None = None
        """``ctx.step`` called from a sync tool: the call fails with it."""

    def begin(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        idempotent: bool,
    ) -> Coroutine[Any, Any, Any]:
        """What ``ctx.step`` returns: the coroutine of :meth:`run`, noted so that
        :meth:`check` finds it if it is never awaited. From a thread (a sync tool),
        :class:`~fxworld.errors.InvalidArgument` at once."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.misused = InvalidArgument(
                f"ctx.step({name!r}) was called from the sync tool {self.call.name!r}, which "
                "runs in a thread where nothing can await it: the step did not run; make the "
                "tool `async def` and write `await ctx.step(...)`"
            )
            raise self.misused from None
        coro = self.run(name, fn, args, kwargs, idempotent)
        self.issued.append((name, coro))
        return coro

    def forget(self) -> list[str]:
        """Close the steps never awaited (no "never awaited" warning: the call's
        error says it); their names."""
        forgotten = []
        for name, coro in self.issued:
            if inspect.getcoroutinestate(coro) == inspect.CORO_CREATED:
                coro.close()
                forgotten.append(name)
        return forgotten

    def check(self) -> None:
        """After the tool returned: :class:`~fxworld.errors.InvalidArgument` when a
        step was never awaited (its effect did not run; its coroutine is closed), or
        when ``ctx.step`` was called from a sync tool (even if the tool caught it)."""
        forgotten = self.forget()
        if self.misused is not None:
            raise self.misused
        if forgotten:
            names = ", ".join(repr(n) for n in forgotten)
            raise InvalidArgument(
                f"ctx.step({names}) in tool {self.call.name!r} was not awaited before the "
                "tool returned: the step did not run and nothing was saved; write "
                "`await ctx.step(...)`"
            )

    async def run(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        idempotent: bool,
    ) -> Any:
        if not isinstance(name, str) or not name:
            raise InvalidArgument(f"a step name must be a non-empty str, not {name!r}")
        if name in self.used:
            raise InvalidArgument(
                f"step name {name!r} is used twice in one call of {self.call.name!r}"
            )
        self.used.add(name)
        c = self.call
        key = step_key(c.execution_id, name)
        if name in c.step_results:  # finished before: its saved result, not run again
            return c.step_results[name]
        if name in c.step_errors:  # ran before, its result refused: not run again
            raise InvalidArgument(c.step_errors[name])
        if name in c.steps_started and not idempotent:
            raise StepInterrupted(name, key)
        started = log.entry(log.STEP_STARTED, execution_id=c.execution_id, step=name, key=key)
        try:
            await self.writer.append([started])
        except InvalidEntry as e:  # before the effect: nothing ran, nothing written
            why = why_refused(e)
            raise InvalidArgument(f"step name {name[:80]!r} cannot be saved: {why}") from None
        result = await _call(fn, args, kwargs)
        finished = log.entry(
            log.STEP_FINISHED, execution_id=c.execution_id, step=name, result=result
        )
        try:
            await self.writer.append([finished])
            return result
        except InvalidEntry as e:  # nothing of it was written (W15)
            error = step_refused(name, type(result).__name__, e)
        await self.writer.append(
            [log.entry(log.STEP_FINISHED, execution_id=c.execution_id, step=name, error=error)]
        )
        raise InvalidArgument(error)


async def _call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Await an async ``fn``; run a sync one in a thread."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    result = await asyncio.to_thread(fn, *args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result
