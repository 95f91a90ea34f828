"""The worker's side of agents as tools (:mod:`fxworld.engine.subagents` has the
steps in full): a call's run makes its child session (:func:`start_child`), a
child's run reports its answer to its parent (:func:`report_to_parent`), and a
stop of the parent's turn is passed on to its children (:func:`stop_children`).
"""

from __future__ import annotations

import json
from functools import partial

from fxworld.errors import Conflict, InvalidArgument
from fxworld.types import Entry, NewEntry

from .. import log
from ..approvals import request_stop
from ..replay import CallState, Replay
from ..subagents import child_key, child_session_id
from ..telemetry import trace_context
from .faults import crash_point
from .state import RunState

__all__ = ["start_child", "report_to_parent", "stop_children"]


async def start_child(run: RunState, c: CallState) -> NewEntry:
    """Make (or, run again, find) the child session of call ``c``; its
    ``child.started``. Raises :class:`~fxworld.errors.InvalidArgument` (the call's
    error result) for an input that is not ``{"input": str}``, or when a session
    of the child's id exists that this call did not make."""
    text = c.input.get("input")
    if not isinstance(text, str):
        raise InvalidArgument(f"an agent tool's input is {{'input': str}}, not {c.input!r}")
    sid = child_session_id(c.execution_id)
    parent = {
        "session": run.sid,
        "execution_id": c.execution_id,
        "call_id": c.id,
        "name": c.name,
        "path": [*run.path, c.name],
    }
    context = run.state.context
    inherited = {} if context is None else {"context": context}
    prompt = log.entry(
        log.PROMPT, text=text, key=c.execution_id, **trace_context(), **inherited, parent=parent
    )
    append = partial(
        run.writer.world.append, sid, [prompt], key=f"prompt:{c.execution_id}", wake=0.0, expect=0
    )
    try:  # the key first (W6): a run again after a crash finds the prompt it saved
        await run.writer.retry(append)
    except Conflict:
        raise InvalidArgument(f"session {sid!r} exists, and was not made by this call") from None
    crash_point("after-child-created")
    return log.entry(
        log.CHILD_STARTED, execution_id=c.execution_id, call_id=c.id, name=c.name, session=sid
    )


def _answer(end: Entry) -> tuple[str, bool]:
    """What the parent's model reads of the child's turn end, and whether it is an error."""
    d = end.data
    if end.kind == log.TURN_FINISHED:
        output = d.get("output")
        return (json.dumps(output) if isinstance(output, dict) else str(d.get("text", ""))), False
    if end.kind == log.TURN_STOPPED:
        reason = d.get("reason")
        why = f": {reason}" if reason else ""
        return f"the agent's turn was stopped{why}; its answer so far: {d.get('text', '')}", True
    return f"the agent's turn failed: {d.get('error', '')}", True


async def report_to_parent(run: RunState) -> None:
    """Append ``child.finished`` to the parent's log once the child's first turn
    ended (keyed: written once however often it is called); else nothing."""
    state: Replay = run.state
    parent, end = state.parent, state.parent_answer
    if parent is None or end is None:
        return
    xid = str(parent.get("execution_id"))
    output, is_error = _answer(end)
    entry = log.entry(
        log.CHILD_FINISHED,
        execution_id=xid,
        call_id=parent.get("call_id"),
        name=parent.get("name"),
        session=run.sid,
        outcome=end.kind.removeprefix("turn."),
        output=output,
        is_error=is_error,
    )
    world, target = run.writer.world, str(parent.get("session"))
    await run.writer.retry(partial(world.append, target, [entry], key=child_key(xid), wake=0.0))


async def stop_children(run: RunState, reason: str | None) -> None:
    """Pass a stop of the current turn on to the child sessions of its open calls
    (a call of an agent tool that started may have made its child already); its
    actor is ``session:<this session's id>``."""
    cur = run.state.current
    if cur is None:
        return
    why = f"its parent session {run.sid} was stopped" + (f": {reason}" if reason else "")
    for c in cur.calls:
        tool = run.agent.tools.get(c.name)
        agent_call = c.started > 0 and tool is not None and tool.agent is not None
        if c.resolved or (c.child is None and not agent_call):
            continue
        sid = c.child or child_session_id(c.execution_id)
        stop = partial(request_stop, run.writer.world, sid, why, actor=f"session:{run.sid}")
        await run.writer.retry(stop)
