"""What a cut call left running in a thread, in its entries and after it.

A sync function of a tool call (the tool's own, or a step's) that is still running
in its thread when the call ends (its tool's timeout, the user's stop, a parallel
call's worker replaced) runs on: a thread cannot be stopped
(:mod:`fxworld.engine.threads`). So that the log tells the truth:

- the entry that closes the call (``tool.finished`` or ``tool.interrupted``) names
  what still runs, in ``running`` (:func:`running_fields`); a call a stop cancelled
  tells the model that, and which of its steps finished (:func:`cancelled_entry`);
- when the thread ends, the worker logs it and appends ``tool.late`` with what it
  returned or raised (:func:`late_saver`), with the run's fence, through its writer,
  whether the run still goes on or has ended (the turn stopped, the wake finished):
  it lands while no other worker has taken the session since. A writer that was
  replaced, or a session deleted meanwhile, saves nothing: the worker's log (WARNING)
  keeps the outcome.
"""

from __future__ import annotations

import logging
from typing import Any

from fxworld.errors import WorldError
from fxworld.scrub import error_text
from fxworld.types import NewEntry

from .. import log
from ..cut_notes import cancelled_message
from ..replay import CallState
from ..threads import CallThreads, Late, OnLate
from ..tools import render_output
from .fenced import StopRun
from .state import RunState

__all__ = ["late_saver", "running_fields", "cancelled_entry"]

logger = logging.getLogger("fxworld.worker")


def running_fields(threads: CallThreads) -> dict[str, Any]:
    """``{"running": [...]}`` for the entry that closes a call whose cut left parts
    of it running (``{}``: nothing runs on)."""
    parts = threads.left_running
    return {"running": parts} if parts else {}


def cancelled_entry(run: RunState, c: CallState, threads: CallThreads) -> NewEntry:
    """The ``tool.interrupted`` of call ``c``, which a stop cancelled while it ran:
    what still runs, and its steps as the log tells them now (``c`` itself may be
    the copy made before its message landed)."""
    cur = run.state.current
    logged = next((x for x in cur.calls if x.execution_id == c.execution_id), c) if cur else c
    running = threads.left_running
    message = cancelled_message(c.name, running, list(logged.step_results), logged.steps_cut)
    return log.entry(
        log.TOOL_INTERRUPTED,
        execution_id=c.execution_id,
        call_id=c.id,
        name=c.name,
        message=message,
        **running_fields(threads),
    )


def late_saver(run: RunState, c: CallState) -> OnLate:
    """Where the late outcomes of call ``c`` go: a ``tool.late`` entry of ``run``'s writer."""

    async def save(late: Late) -> None:
        if late.error is not None:
            output, is_error = error_text(late.error), True  # scrubbed, as tool.finished's
        else:
            output, is_error = render_output(late.value), False
        step = {} if late.step is None else {"step": late.step}
        entry = log.entry(
            log.TOOL_LATE,
            execution_id=c.execution_id,
            call_id=c.id,
            name=c.name,
            part=late.part,
            **step,
            output=output,
            is_error=is_error,
        )
        try:
            await run.writer.append([entry])
        except (WorldError, StopRun) as e:  # Fenced (replaced), deleted, too large, ...
            logger.warning(
                "session %s: %s of call %s ended after its call; not saved (%s: %s); it %s: %s",
                run.sid,
                late.part,
                c.execution_id,
                type(e).__name__,
                e,
                "raised" if is_error else "returned",
                output[:200],
            )
            return
        logger.info("session %s: %s of call %s ended late; saved", run.sid, late.part, c.id)

    return save
