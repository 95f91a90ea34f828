"""The tool step: ``tool.started`` before a call runs, ``tool.finished`` after.

A call's ``tool.started`` lands before the call runs (with the model's reply, or,
after a replay, in one append for the calls to run again), and its
``tool.finished`` as the call ends, before the next model call begins: a
finished call's result is never lost. Parallel calls (several in one message)
run at the same time; results of calls that end while another is being appended
share the next append. After a crash, each call that was started and not
finished is handled on its own: an idempotent one runs again (attempt + 1, the
same ``execution_id``), any other becomes ``tool.interrupted`` and the model
hears that it may have partly run.

A result the world refuses to save (too large for one entry, or not valid
Unicode) is saved as an error the model hears, naming its size and the world's
limit (:mod:`fxworld.engine.unsaved`); the turn goes on and the tool is not run
again.

A stop cancels a running async tool (its call becomes ``tool.interrupted``); a
sync tool runs in a thread and is let finish, and its result is saved.

A call of an agent tool (``agent.as_tool()``) makes its child session and ends
with ``child.started`` instead: it waits for the child's answer
(:mod:`fxworld.engine.subagents`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fxworld.errors import InvalidArgument, InvalidEntry
from fxworld.scrub import error_text
from fxworld.types import NewEntry

from .. import log
from ..context import own_copy
from ..replay import CallState, RunTools, stopped_message
from ..steps import StepJournal
from ..tools import Tool, ToolContext, render_output
from ..unsaved import refused_result
from .children import start_child
from .faults import crash_point
from .signals import Cut
from .state import RunState

__all__ = ["run_tools", "run_started", "start_entries", "tool_entry"]

logger = logging.getLogger("fxworld.worker")

Run = tuple[CallState, int]
"""A call to run, with its attempt number."""


def tool_entry(kind: str, c: CallState, **data: Any) -> NewEntry:
    """A ``tool.*`` entry of call ``c``: its execution id, call id and name, then ``data``."""
    return log.entry(kind, execution_id=c.execution_id, call_id=c.id, name=c.name, **data)


def start_entries(
    tools: Mapping[str, Tool], calls: Sequence[Run]
) -> tuple[list[NewEntry], list[Run]]:
    """What to append before calls run: ``tool.started`` for each known tool (its
    run follows), ``tool.finished`` with an error for each unknown one; and the
    calls that then run."""
    entries: list[NewEntry] = []
    runs: list[Run] = []
    for c, attempt in calls:
        if c.name in tools:
            entries.append(tool_entry(log.TOOL_STARTED, c, input=c.input, attempt=attempt))
            runs.append((c, attempt))
        else:
            output = f"unknown tool {c.name!r}; available: {sorted(tools)}"
            entries.append(tool_entry(log.TOOL_FINISHED, c, output=output, is_error=True))
    return entries, runs


async def run_tools(run: RunState, step: RunTools) -> None:
    """The step after a replay: calls never started, or idempotent ones to run
    again; their ``tool.started`` entries in one append, then the runs."""
    if run.signals.stop:
        return  # a stop landed: no new tool starts (the step loop ends the turn)
    entries, runs = start_entries(run.agent.tools, step.runs)
    if any(c.approval == "approved" for c, _ in runs):
        crash_point("before-approved-call")
    await run.writer.append(entries)
    crash_point("after-tool-started")
    await run_started(run, runs)


async def run_started(run: RunState, runs: Sequence[Run]) -> None:
    """Run calls whose ``tool.started`` is saved, and save each one's result."""
    if len(runs) == 1:  # the common case: no task to make
        await _save(run, [await _result(run, *runs[0])])
    elif runs:
        await _together(run, runs)


async def _save(run: RunState, finished: list[NewEntry]) -> None:
    try:
        await run.writer.append(finished)
    except InvalidEntry as e:  # nothing of it was written (W15)
        await _save_refused(run, finished, e)
    crash_point("after-tool-finished")


async def _save_refused(run: RunState, finished: list[NewEntry], e: InvalidEntry) -> None:
    """Save results the world refused: each refused one as an error the model
    hears (one by one when several went together: only the refused ones)."""
    if len(finished) > 1:
        for entry in finished:
            await _save_refused_one(run, entry)
    elif finished[0].kind == log.TOOL_FINISHED:
        await _save_as_error(run, finished[0], e)
    else:
        raise e


async def _save_refused_one(run: RunState, entry: NewEntry) -> None:
    try:
        await run.writer.append([entry])
    except InvalidEntry as e:
        if entry.kind != log.TOOL_FINISHED:
            raise
        await _save_as_error(run, entry, e)


async def _save_as_error(run: RunState, entry: NewEntry, e: InvalidEntry) -> None:
    error = refused_result(entry, e)
    logger.warning("session %s: %s", run.sid, error.data["output"])
    await run.writer.append([error])


async def _together(run: RunState, runs: Sequence[Run]) -> None:
    """Parallel calls at the same time; each result is appended as its call ends
    (results that come while another is being appended go together next)."""
    lock = asyncio.Lock()
    finished: list[NewEntry] = []

    async def one(c: CallState, attempt: int) -> None:
        finished.append(await _result(run, c, attempt))
        async with lock:
            if finished:  # else: appended with another call's result
                batch = finished[:]
                finished.clear()
                await _save(run, batch)

    tasks = [asyncio.create_task(one(c, attempt)) for c, attempt in runs]
    try:
        await asyncio.gather(*tasks)
    finally:  # replaced (Fenced): nothing more of this step runs
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _result(run: RunState, c: CallState, attempt: int) -> NewEntry:
    """:func:`_run_call` inside its ``execute_tool`` span, current while the tool
    runs (so the tool's own spans nest under it)."""
    span = run.telemetry.tool(c, attempt)
    token = span.attach()
    try:
        entry = await _run_call(run, c, attempt)
        if entry.kind == log.TOOL_INTERRUPTED:
            span.cut("interrupted")
        elif entry.kind != log.CHILD_STARTED:  # (a child's answer comes later)
            span.result(str(entry.data.get("output", "")), entry.data.get("is_error") is True)
        return entry
    except BaseException as e:  # cancelled
        span.cut(type(e).__name__)
        raise
    finally:
        span.detach(token)
        span.end()


async def _run_call(run: RunState, c: CallState, attempt: int) -> NewEntry:
    """Run one call; the entry of its result (a tool that raises is a result the
    model sees; a call a stop cut is ``tool.interrupted``)."""
    tool = run.agent.tools[c.name]
    if tool.agent is not None:  # its child session answers later
        try:
            return await start_child(run, c)
        except InvalidArgument as e:  # (storage errors are the run's, not the call's)
            return tool_entry(log.TOOL_FINISHED, c, output=error_text(e), is_error=True)
    journal = StepJournal(run.writer, c)
    try:
        ctx = ToolContext(
            c.execution_id, run.sid, c.id, c.name, attempt, own_copy(run.context), journal=journal
        )
        if tool.is_async:  # a stop cancels it
            with run.signals.cutting(handover=False):
                value = await tool.call(c.input, ctx)
        else:  # in a thread: let finish
            value = await tool.call(c.input, ctx)
        return tool_entry(log.TOOL_FINISHED, c, output=render_output(value), is_error=False)
    except Cut:
        return tool_entry(log.TOOL_INTERRUPTED, c, message=stopped_message(c.name))
    except Exception as e:
        logger.info("session %s: tool %s raised", run.sid, c.name, exc_info=True)
        # scrubbed: the log is streamed to clients
        return tool_entry(log.TOOL_FINISHED, c, output=error_text(e), is_error=True)
