"""The approval and stop steps.

- ``RequestApproval``: one ``approval.requested`` per call, appended with a delayed
  wake at the first timeout (W7), so the timeout happens even if no process is up.
- ``WaitForApproval``: only undecided calls are left; the run finishes its wake and
  holds nothing. A decision (an unfenced append with a wake) brings a worker back.
- ``TimeOutApproval``: the worker writes the timeout's denial
  (:func:`~fxworld.engine.approvals.expired_decision`), keyed like a person's
  decision, so whichever lands first stands (W6); a decision that comes after
  the expiry writes that same denial instead of its own.
- A call the log shows waiting for a decision waits by the log, not by the
  tools of this deploy: dropping ``needs_approval`` never runs it undecided.
- ``StopTurn``: a ``stop.requested`` for the current turn ends it with
  ``turn.stopped`` (how a running step is cut: :mod:`fxworld.engine._run.signals`),
  after passing the stop on to the child sessions its calls wait for.
- ``WaitForChild``: only calls waiting for their child sessions (agent tools) are
  left; like an approval, the run finishes its wake and holds nothing, and each
  child's ``child.finished`` lands with a wake (:mod:`fxworld.engine.subagents`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from functools import partial

from fxworld.errors import InvalidEntry
from fxworld.types import NewEntry

from .. import clock, log
from ..approvals import decision_key, expired_decision, requested_entry
from ..replay import (
    CallState,
    RequestApproval,
    StopTurn,
    TimeOutApproval,
    WaitForApproval,
    WaitForChild,
)
from ..tools import Tool
from .children import stop_children
from .faults import crash_point
from .state import RunState

__all__ = [
    "approval_entries",
    "request_approval",
    "time_out_approval",
    "stop_turn",
    "wait_for_approval",
    "wait_for_child",
]

logger = logging.getLogger("fxworld.worker")


def approval_entries(
    tools: Mapping[str, Tool], calls: Sequence[CallState]
) -> tuple[list[NewEntry], float | None]:
    """One ``approval.requested`` per call, and the delay of the wake that must land
    with them (W7): the first timeout, so it happens even if no process is up."""
    now = clock.now()
    entries = []
    for c in calls:
        timeout = tools[c.name].approval_timeout
        expires = None if timeout is None else (now + timedelta(seconds=timeout))
        entries.append(requested_entry(c.execution_id, c.id, c.name, c.input, timeout, expires))
    timeouts = [t for c in calls if (t := tools[c.name].approval_timeout)]
    return entries, (min(timeouts) if timeouts else None)


async def request_approval(run: RunState, step: RequestApproval) -> None:
    entries, wake = approval_entries(run.agent.tools, step.calls)
    await run.writer.append(entries, wake=wake)
    run.telemetry.approvals(len(entries))
    crash_point("after-approval-requested")


async def time_out_approval(run: RunState, step: TimeOutApproval) -> None:
    decided = expired_decision(step.call.execution_id, step.reason)
    # keyed like a person's decision: if one landed first, it stands (W6)
    await run.writer.append_keyed(decided, decision_key(step.call.execution_id))
    run.telemetry.approvals(-1)


async def stop_turn(run: RunState, step: StopTurn) -> None:
    cur = run.state.current
    assert cur is not None
    await stop_children(run, step.reason)
    stopped = partial(log.entry, log.TURN_STOPPED, prompt=cur.prompt, turn=cur.turn)
    try:
        await run.writer.append([stopped(text=step.text, reason=step.reason)])
    except InvalidEntry:  # its text so far, too large to save again: its chunks hold it
        await run.writer.append([stopped(text="", reason=step.reason)])
    logger.info("session %s: turn stopped", run.sid)


async def wait_for_approval(run: RunState, step: WaitForApproval) -> None:
    """Only undecided calls are left: hold nothing. A decision's wake brings a
    worker back; the first expiry has its own delayed wake."""
    if step.due is not None:
        await run.writer.wake_again(max(0.0, (step.due - clock.now()).total_seconds()))
    logger.info("session %s: waiting for approval; holding nothing", run.sid)


async def wait_for_child(run: RunState, step: WaitForChild) -> None:
    """Only calls waiting for their child sessions are left: hold nothing; each
    child's ``child.finished`` brings a worker back."""
    logger.info(
        "session %s: waiting for child session(s) %s; holding nothing",
        run.sid,
        ", ".join(step.sessions),
    )
