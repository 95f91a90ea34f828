"""Agents as tools: a call that runs a turn of another agent in a child session.

``other.as_tool(name=..., description=...)`` makes a :class:`~fxworld.engine.tools.Tool`
whose ``agent`` is ``other`` (:func:`agent_tool`). A call of it runs so that a
child turn is never started twice and the parent waits holding nothing:

1. The call's ``tool.started`` lands with the model's reply, as for any tool.
2. Its run makes the child session (:func:`start_child`): the call's ``input``
   becomes the first prompt of session :func:`child_session_id` (derived from the
   call's ``execution_id``), appended only as the first entry of an empty log
   (W5), keyed ``prompt:<execution_id>`` (W6), with a wake (W7). The prompt
   carries ``parent`` (the call, and the path of agent tools from the worker's
   agent to the child's), the parent's context (the child inherits it: a tool of
   the child reads the same tenant), and the trace context of the call's
   ``execute_tool`` span (one trace holds both turns). A call run again after a
   crash finds its prompt under the key: the same child, never a second turn.
3. ``child.started`` lands in the parent's log: the call waits for its child
   (:class:`~fxworld.engine.replay.WaitForChild`), and the parent's run finishes
   its wake and holds nothing, as for an approval, however long the child takes.
4. A worker of the parent's agent takes the child's wake and runs it with the
   child's agent, found from the path (:func:`agent_for`). When the child's first
   turn has ended, the worker appends ``child.finished`` to the parent's log
   (:func:`report_to_parent`: unfenced, keyed ``child:<execution_id>``, with a
   wake) BEFORE it finishes the child's wake: a worker that dies in between
   leaves that wake to be delivered again, and the next run reports it (the key
   writes it once).
5. The parent's worker wakes; the child's answer is the call's result.

``stop.requested`` on the parent's turn is passed on to every child it waits for
(:func:`stop_children`) before ``turn.stopped`` ends it. An approval inside the
child is the child's own: decided on the child session like any other, while the
parent waits for the child's answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from typing import Any, Final

from fxworld.errors import Conflict, InvalidArgument, InvalidEntry
from fxworld.types import Entry, NewEntry

from . import log
from .approvals import request_stop
from .context import AgentParts, RunContext
from .faults import crash_point
from .replay import CallState, Replay
from .telemetry import trace_context
from .tools import Tool
from .unsaved import why_refused

__all__ = [
    "INPUT_SCHEMA",
    "agent_tool",
    "child_session_id",
    "child_key",
    "agent_for",
    "no_agent",
    "start_child",
    "report_to_parent",
    "stop_children",
]

INPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "input": {"type": "string", "description": "What to ask the agent, in plain words."}
    },
    "required": ["input"],
}
"""The input of an agent tool: the text of the child session's first prompt."""


def child_session_id(execution_id: str) -> str:
    """The id of the child session a call of an agent tool runs in: derived from
    its ``execution_id``, so every run of the call finds the same child."""
    return f"child-{execution_id}"


def child_key(execution_id: str) -> str:
    """The idempotency key of the ``child.finished`` a child appends to its parent."""
    return f"child:{execution_id}"


def _not_called(**_: Any) -> Any:
    raise InvalidArgument("an agent tool runs only inside a turn of a worker")


def agent_tool(agent: AgentParts, name: str, description: str) -> Tool:
    """A tool whose calls run a turn of ``agent`` in a child session."""
    return Tool(
        name=name,
        description=description,
        input_schema=INPUT_SCHEMA,
        fn=_not_called,
        agent=agent,
    )


def agent_for(root: AgentParts, path: Sequence[str]) -> AgentParts | None:
    """The agent at the end of ``path`` from ``root`` (``None``: no agent tool there)."""
    agent = root
    for name in path:
        t = agent.tools.get(name)
        if t is None or t.agent is None:
            return None
        agent = t.agent
    return agent


def no_agent(path: Sequence[str]) -> str:
    """Why a child session whose agent is not found cannot run."""
    return (
        f"no agent runs this child session: the worker's agent has no agent tool at "
        f"{' > '.join(path)!r} (a deploy without it?)"
    )


async def start_child(run: RunContext, c: CallState) -> NewEntry:
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


async def report_to_parent(run: RunContext) -> None:
    """Append ``child.finished`` to the parent's log once the child's first turn
    ended (keyed: written once however often it is called); else nothing."""
    state: Replay = run.state
    parent, end = state.parent, state.parent_answer
    if parent is None or end is None:
        return
    xid = str(parent.get("execution_id"))
    output, is_error = _answer(end)
    fields = {
        "execution_id": xid,
        "call_id": parent.get("call_id"),
        "name": parent.get("name"),
        "session": run.sid,
        "outcome": end.kind.removeprefix("turn."),
    }
    entry = log.entry(log.CHILD_FINISHED, **fields, output=output, is_error=is_error)
    world, target = run.writer.world, str(parent.get("session"))
    try:
        await run.writer.retry(partial(world.append, target, [entry], key=child_key(xid), wake=0.0))
    except InvalidEntry as e:  # (too large for the parent's world): an error it hears
        output = f"the agent's answer was not passed on: {why_refused(e)}"
        entry = log.entry(log.CHILD_FINISHED, **fields, output=output, is_error=True)
        await run.writer.retry(partial(world.append, target, [entry], key=child_key(xid), wake=0.0))


async def stop_children(run: RunContext, reason: str | None) -> None:
    """Pass a stop of the current turn on to the child sessions of its open calls
    (a call of an agent tool that started may have made its child already)."""
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
        await run.writer.retry(partial(request_stop, run.writer.world, sid, why))
