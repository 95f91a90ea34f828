"""The worker's side of agents as tools (:mod:`fxworld.engine.subagents` has the
steps in full): a call's run makes its child session (:func:`start_child`), a
child's run checks, before its first turn starts, that its parent still waits for
it (:func:`parent_moved_on`) and reports its answer to its parent
(:func:`report_to_parent`), and a stop of the parent's turn is passed on to its
children (:func:`stop_children`).

Two sessions, two logs, and no write that spans both: a parent's fence (W1, W2)
guards the parent's log only, so the child's first prompt, appended to the
child's log, cannot carry it. A check of the fence just before that append would
not do either: a writer may stall (SIGSTOP, a long pause) between the check and
the append, be replaced meanwhile, and write the prompt anyway; the same holds
for ``child.started`` written (fenced) before the child is made, which also
leaves a saved call without a child for every crash in between. So the child
decides, where it runs, from the parent's log:

- **A replaced parent starts nothing.** The first prompt names the parent's log
  position ``at`` the call was made at (its ``tool.started`` is at or before it).
  Before the child's first turn starts, its run reads the parent's log from
  ``at`` (one read, of the few entries a waiting turn has): if the parent is
  gone (deleted: nothing at ``at``), its turn ended (``turn.finished``,
  ``turn.failed``, ``turn.stopped``) or was asked to stop (``stop.requested``),
  or the call has its result already, the child's turn ends at once
  (``turn.stopped``, naming why) in the same append as its ``turn.started``: no
  model call, no tool. The parent itself pays no round trip for this.
  The check and a stop cannot miss each other: a stop of the parent lands in its
  log before its worker passes it on (``stop_children``); a child made before
  that is stopped by it, one made after reads the stop. A deleted parent is
  first taken (a new fence: no replaced writer lands a call after it), then
  deleted, then its children are stopped: one made after reads that it is gone.
- **A report never makes a session.** ``child.finished`` is appended with
  ``expect=`` the parent's last seq (W5): first guessed (the parent usually ends
  with the ``child.started`` after ``at``), then the ``last`` a ``Conflict``
  names, as long as that is at least ``at``; a log shorter than that (deleted) is
  left alone. A parent deleted between two tries reads ``last`` 0: nothing is
  written.
- **A child is known by its first entry, not its key.** Anyone can append to any
  session (W3), so a session of the child's id holding a prompt under the child's
  key (a client's, say) is not proof: after the keyed append, the child's first
  entry is read and must be this call's prompt (``parent`` naming this session
  and ``execution_id``); otherwise the call fails with an error the model hears.

Round trips this adds: none to a parent's run; one read to make a child (its
first entry); one read of the parent's log before a child's first turn; none to
a report whose guess of the parent's end is right, one more when it is not.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from functools import partial
from typing import Any

from fxworld.errors import Conflict, InvalidArgument, InvalidEntry
from fxworld.types import Entry, NewEntry

from .. import log
from ..approvals import request_stop
from ..limits import depth_refusal
from ..owners import claim_for
from ..replay import CallState, Replay
from ..subagents import child_key, child_session_id, open_children
from ..telemetry import trace_context
from ..unsaved import why_refused
from .faults import crash_point
from .state import RunState

__all__ = ["start_child", "parent_moved_on", "report_to_parent", "stop_children"]

logger = logging.getLogger("fxworld.worker")

_PAGE = 100
"""Entries per read of a parent's log (a waiting turn has a few after ``at``)."""


async def start_child(run: RunState, c: CallState) -> NewEntry:
    """Make (or, run again, find) the child session of call ``c``; its
    ``child.started``. Raises :class:`~fxworld.errors.InvalidArgument` (the call's
    error result) for an input that is not ``{"input": str}``, when the child would
    nest deeper than the agent's ``max_depth`` (:mod:`fxworld.engine.limits`: no
    child is made), or when a session of the child's id exists that this call did
    not make (its first entry is not this call's prompt: see the module)."""
    refused = depth_refusal(run.path, c.name, run.agent.max_depth)
    if refused is not None:
        raise InvalidArgument(refused)
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
        "at": run.state.last_seq,  # the call's tool.started is at or before it
    }
    context = run.state.context
    inherited = {} if context is None else {"context": context}
    tool = run.agent.tools.get(c.name)
    child_agent = tool.agent.name if tool is not None and tool.agent is not None else None
    named = {} if child_agent is None else {"agent": child_agent}
    prompt = log.entry(
        log.PROMPT,
        text=text,
        key=c.execution_id,
        **named,
        **trace_context(),
        **inherited,
        parent=parent,
    )
    if child_agent is not None:  # the child is its agent's session, run by its runners
        owner = await run.writer.retry(partial(claim_for, run.writer.world, sid, child_agent))
        if owner != child_agent:
            raise InvalidArgument(f"session {sid!r} exists, and belongs to agent {owner!r}")
    append = partial(
        run.writer.world.append, sid, [prompt], key=f"prompt:{c.execution_id}", wake=0.0, expect=0
    )
    crash_point("before-child-created")
    try:  # the key first (W6): a run again after a crash finds the prompt it saved
        await run.writer.retry(append)
    except Conflict:
        raise InvalidArgument(f"session {sid!r} exists, and was not made by this call") from None
    first = await run.writer.retry(partial(run.writer.world.read, sid, 0, limit=1))
    if not first or not _made_by(first[0], run.sid, c.execution_id):
        raise InvalidArgument(
            f"session {sid!r} exists, and was not made by this call (its first entry "
            "is not this call's prompt)"
        )
    crash_point("after-child-created")
    return log.entry(
        log.CHILD_STARTED, execution_id=c.execution_id, call_id=c.id, name=c.name, session=sid
    )


def _made_by(first: Entry, sid: str, execution_id: str) -> bool:
    """Whether ``first`` is the prompt a call ``execution_id`` of session ``sid`` made."""
    parent = first.data.get("parent") if first.kind == log.PROMPT else None
    return (
        isinstance(parent, dict)
        and parent.get("session") == sid
        and parent.get("execution_id") == execution_id
    )


def _at(parent: Mapping[str, Any]) -> int:
    """The parent's log position the call was made at (0: a child of an older fxworld)."""
    at = parent.get("at")
    return at if isinstance(at, int) and at > 0 else 0


def _moved(e: Entry, execution_id: str) -> str:
    """What entry ``e`` of the parent's log (after the call was made) says of the
    call ("": nothing; it still waits)."""
    if e.kind in log.TURN_END_KINDS:
        return f"its turn ended ({e.kind})"
    if e.kind == log.STOP_REQUESTED:
        return "its turn was stopped"
    ended = (log.TOOL_FINISHED, log.TOOL_INTERRUPTED, log.CHILD_FINISHED)
    if e.kind in ended and e.data.get("execution_id") == execution_id:
        return f"the call has its result ({e.kind})"
    return ""


async def parent_moved_on(run: RunState) -> str:
    """Why this child session's first turn must not run: its parent's call no
    longer waits for it (see the module); "" when it does, or when this is no
    child, or a child of an older fxworld (no ``at``: it runs as before). One
    read of the parent's log, from the call on."""
    parent = run.state.parent
    if parent is None or not _at(parent):
        return ""
    world, psid, at = run.writer.world, str(parent.get("session")), _at(parent)
    xid = str(parent.get("execution_id"))
    after = at - 1
    while True:
        batch = await run.writer.retry(partial(world.read, psid, after, limit=_PAGE))
        if after == at - 1 and (not batch or batch[0].seq != at):
            return f"its parent session {psid} was deleted"
        for e in batch:
            why = _moved(e, xid)
            if why:
                return f"its parent session {psid} moved on: {why}"
        if len(batch) < _PAGE:
            return ""
        after = batch[-1].seq


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
    ended (keyed: written once however often it is called); else nothing. Only
    to a parent that exists: never to a deleted one (see the module)."""
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
    target = str(parent.get("session"))
    try:
        await _report(run, target, entry, xid, _at(parent) or 1)
    except InvalidEntry as e:  # (too large for the parent's world): an error it hears
        output = f"the agent's answer was not passed on: {why_refused(e)}"
        entry = log.entry(log.CHILD_FINISHED, **fields, output=output, is_error=True)
        await _report(run, target, entry, xid, _at(parent) or 1)


async def _report(run: RunState, target: str, entry: NewEntry, xid: str, at: int) -> None:
    """Append the report where the parent's log stands at ``at`` or after; nothing
    to a parent whose log is shorter (it was deleted)."""
    world = run.writer.world
    last = at + 1  # a guess: the parent's call, then its child.started
    while True:
        append = partial(world.append, target, [entry], key=child_key(xid), wake=0.0, expect=last)
        try:
            await run.writer.retry(append)
            return
        except Conflict as e:
            if e.last < at:
                logger.info("session %s: its parent %s is gone; no report", run.sid, target)
                return
            last = e.last


async def stop_children(run: RunState, reason: str | None) -> None:
    """Pass a stop of the current turn on to the child sessions of its open calls
    (a call of an agent tool that started may have made its child already); its
    actor is ``session:<this session's id>``."""
    why = f"its parent session {run.sid} was stopped" + (f": {reason}" if reason else "")
    for sid in open_children(run.state.current, run.agent.tools):
        stop = partial(request_stop, run.writer.world, sid, why, actor=f"session:{run.sid}")
        await run.writer.retry(stop)
