"""Durable steps inside a tool: ``await ctx.step(name, fn, *args, **kwargs)``.

A step runs ``fn`` once and saves its result in the session's log before
returning it: ``step.started`` is appended (fenced) before ``fn`` runs and
``step.finished`` with its JSON result after. When a ``@tool(resumable=True)``
call is run again after a crash (same ``execution_id``), a step whose
``step.finished`` is saved returns that result without running; a step that
started but did not finish runs again if it was marked ``idempotent=True``, and
otherwise raises :class:`StepInterrupted`, which the tool may catch; its message
names the call's steps that finished.

A sync ``fn`` runs in a thread, which nothing can stop: cut by its tool's timeout
or by the user's stop while it runs, it runs on. The call's error then says the
step was NOT stopped, and what ``fn`` returns or raises in the end is saved as a
``tool.late`` entry (not ``step.finished``: the call is closed by then), see
:mod:`fxworld.engine.threads`.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence, Set
from typing import Any, Protocol

from fxworld.errors import InvalidArgument, WorldError

from . import log
from .cut_notes import finished_note
from .threads import CallThreads

__all__ = ["StepInterrupted", "StepJournal", "StepLog", "StepCall", "step_key"]


class StepInterrupted(WorldError):
    """A non-idempotent step of this call was started before a crash and did not
    finish: it may have partly run, so it is not run again. The message also names
    the call's steps that ``finished`` (their effects happened, once), so a model
    that hears it knows what calling the tool again would repeat."""

    def __init__(self, name: str, key: str, finished: Sequence[str] = ()) -> None:
        super().__init__(
            f"step {name!r} (key {key}) was started before a crash and did not finish; "
            "it may have partly run, and is not run again (mark it idempotent=True to re-run). "
            + (finished_note(finished) or "No other step of this call had finished.")
        )
        self.name = name
        self.key = key
        self.finished = tuple(finished)


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


class StepJournal:
    """The steps of one running call: what the log already holds for it, which
    names this run used (a name is used once per call), and the call's threads
    (a sync step's function runs in one: :mod:`fxworld.engine.threads`)."""

    def __init__(self, writer: StepLog, call: StepCall, threads: CallThreads | None = None) -> None:
        self.writer = writer
        self.call = call
        self.used: set[str] = set()
        self.threads = threads if threads is not None else CallThreads()

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
        if name in c.steps_started and not idempotent:
            raise StepInterrupted(name, key, list(c.step_results))
        await self.writer.append(
            [log.entry(log.STEP_STARTED, execution_id=c.execution_id, step=name, key=key)]
        )
        result = await _call(fn, args, kwargs, self.threads, name)
        try:
            json.dumps(result, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise InvalidArgument(
                f"step {name!r} returned {type(result).__name__}, which is not JSON: {e}"
            ) from e
        await self.writer.append(
            [log.entry(log.STEP_FINISHED, execution_id=c.execution_id, step=name, result=result)]
        )
        return result


async def _call(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    threads: CallThreads,
    name: str,
) -> Any:
    """Await an async ``fn``; run a sync one in a thread of the call's."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    result = await threads.run(f"step:{name}", fn, *args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result
