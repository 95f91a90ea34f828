"""The engine's log format: the entry kinds a session's log holds, version 4.

Every entry the engine writes carries ``"v"`` in its data (:data:`LOG_VERSION`).
Readers accept any entry whose ``v`` is at most :data:`LOG_VERSION`, ignore data fields they do not
know, and skip kinds they do not know, so older logs stay readable and newer
fields can be added without breaking old readers. ``docs/log-format.md`` is the
description stream consumers depend on; this module is its single source in code.
"""

from __future__ import annotations

from typing import Any, Final

from fxworld.types import JSONObject, NewEntry

__all__ = [
    "LOG_VERSION",
    "PROMPT",
    "TURN_STARTED",
    "TEXT",
    "TEXT_DISCARDED",
    "MESSAGE",
    "TOOL_STARTED",
    "TOOL_FINISHED",
    "TOOL_INTERRUPTED",
    "TOOL_LATE",
    "TURN_FINISHED",
    "TURN_FAILED",
    "TURN_YIELDED",
    "FENCE",
    "APPROVAL_REQUESTED",
    "APPROVAL_DECIDED",
    "STOP_REQUESTED",
    "TURN_STOPPED",
    "TURN_END_KINDS",
    "FORKED",
    "OUTPUT_INVALID",
    "STEP_STARTED",
    "STEP_FINISHED",
    "CHILD_STARTED",
    "CHILD_FINISHED",
    "ATTENTION_CLEARED",
    "entry",
]

LOG_VERSION: Final = 4
"""The newest version this fxworld reads. An entry's ``v`` is the oldest version
that reads it correctly: 1 for the kinds of version 1, 2 for the approval,
stop and step kinds (an fxworld without them must refuse the log, not run a call that
waits for a person or continue a stopped turn), 3 for ``output.invalid`` (one
without it would end the turn with the answer it refused), 4 for the kinds of
agents as tools and a child session's first prompt (one without them would run
the child with the parent's agent, or take a call waiting for its child as cut)."""

PROMPT: Final = "prompt"
"""A user prompt, appended unfenced by ``Session.prompt``:
``{"text", "key", "trace"?, "context"?, "actor"?, "parent"?}`` (``trace``: the caller's W3C trace
context, when it prompted inside an OpenTelemetry span: :mod:`fxworld.engine.telemetry`;
``context``: the session's context, a JSON object, only on the first entry of a
log: :mod:`fxworld.engine.context`; ``actor``: on a prompt sent again by the
inspector's Retry, who retried; ``parent``: only on the first entry of
a child session, the call of the parent that made it, ``{"session",
"execution_id", "call_id", "name", "path"}``, version 4:
:mod:`fxworld.engine.subagents`)."""
TURN_STARTED: Final = "turn.started"
"""A worker began answering the prompt at seq ``prompt``: ``{"prompt", "turn",
"trace"?}`` (``trace``: the W3C context of its ``invoke_agent`` span, when traced)."""
TEXT: Final = "text"
"""A chunk of model text as it streamed: ``{"call", "text"}``."""
TEXT_DISCARDED: Final = "text.discarded"
"""The model call ``call`` was cut (crash, handover, retried error); its ``text``
chunks are not part of the conversation and the call is made again:
``{"call", "reason"}``."""
MESSAGE: Final = "message"
"""The model's whole reply: ``{"call", "model", "text", "tool_calls": [{"id",
"name", "input", "execution_id"}], "usage": {"input_tokens", "output_tokens"} |
null, "stop_reason"}``."""
TOOL_STARTED: Final = "tool.started"
"""Written *before* a tool runs: ``{"execution_id", "call_id", "name", "input",
"attempt"}`` (attempt 2, 3, ... when an idempotent call runs again)."""
TOOL_FINISHED: Final = "tool.finished"
"""A tool returned or raised: ``{"execution_id", "call_id", "name", "output",
"is_error", "running"?}`` (``running``: what of the call still ran in a thread
when it ended, e.g. past its timeout: ``"tool:<name>"``, ``"step:<name>"``; its
outcome comes later as ``tool.late``)."""
TOOL_INTERRUPTED: Final = "tool.interrupted"
"""A non-idempotent call was found started but not finished, or a stop cancelled
it; it is not run again and the model is told: ``{"execution_id", "call_id",
"name", "message", "running"?}`` (``running``: as ``tool.finished``'s)."""
TOOL_LATE: Final = "tool.late"
"""A sync function of a call (the tool's, or a step's) that its call's end left
running in a thread (``running`` of ``tool.finished``/``tool.interrupted``) ended:
``{"execution_id", "call_id", "name", "part", "step"?, "output", "is_error"}``
(``part``: ``"tool:<name>"`` or ``"step:<name>"``; ``step``: the step's name;
``output``: what it returned, as text (JSON unless a str), or ``"<Type>: <message>"``
for what it raised). Fenced, by the worker that ran it, while its fence holds
(else only logged). Informational: the model does not hear it, and a replay
ignores it, so version 1."""
TURN_FINISHED: Final = "turn.finished"
"""The turn answering prompt ``prompt`` ended with ``text``: ``{"prompt", "turn", "text",
"output"?}`` (``output``: the answer validated against the agent's ``output_type``, as
a JSON object)."""
TURN_FAILED: Final = "turn.failed"
"""The turn answering prompt ``prompt`` failed: ``{"prompt", "turn", "error"}``."""
TURN_YIELDED: Final = "turn.yielded"
"""The worker stopped at a step boundary and asked for a wake, so another
invocation continues: ``{"prompt", "turn", "reason": "deadline" | "handover"}``."""
FENCE: Final = "fence"
"""Written by the world itself on every takeover (``acquire``): ``{"epoch"}``."""


# -- approvals and stop ---------------------------------------------------------------

APPROVAL_REQUESTED: Final = "approval.requested"
"""A call of a ``needs_approval`` tool waits for a person; the turn holds no worker
meanwhile: ``{"execution_id", "call_id", "name", "input", "timeout": seconds |
null, "expires_at": ISO 8601 UTC | null}``."""
APPROVAL_DECIDED: Final = "approval.decided"
"""The decision on call ``execution_id`` (unfenced from ``approve``/``deny``; or,
once ``expires_at`` passed, the timeout's denial with ``"expired": true``, by a
worker or by the process whose decision came too late), keyed
``approval:<execution_id>`` so the first decision wins: ``{"execution_id",
"approved", "actor"?, "note"?, "reason"?, "expired"?}``: ``actor``, who decided
(a person's decision; not on the timeout's); ``note``, the approval's note or the
denial's reason, which a denial also gives as ``reason``. A call with
``approval.requested`` runs only after an approving decision, whatever the tools say now.
``actor`` and a denial's ``note`` were added within version 2 (older entries lack them)."""
STOP_REQUESTED: Final = "stop.requested"
"""``Session.stop()`` asked the turn answering prompt ``prompt`` to end, unfenced,
keyed ``stop:<prompt>``: ``{"prompt", "reason", "actor"?}`` (``actor``: who
stopped it; added within version 2)."""
TURN_STOPPED: Final = "turn.stopped"
"""The turn answering prompt ``prompt`` was stopped; ``text`` is the text of its
last model call saved so far (cut or whole): ``{"prompt", "turn", "text", "reason"}``."""

FORKED: Final = "forked"
"""The first entry of a fork (``Session.fork``), written with its copy of the
source in one append: ``{"source", "at", "cursor", "entries"}``: the source's id,
the seq in the source the fork was made at and its cursor there, and how many
entries were copied after this one, ``"context"?``, the source's context, and
``"agents"?``, for a fork of a child session (or of such a fork), the path of agent
tools to the agent that runs it (:mod:`fxworld.engine.subagents`).
Version 1: an fxworld that does not know the kind skips it and reads the fork
correctly."""

OUTPUT_INVALID: Final = "output.invalid"
"""The final answer of model call ``call`` did not validate against the agent's
``output_type``; the model hears ``error`` and answers again (or the turn fails,
after ``output_retries`` of them): ``{"call", "error"}``. Version 3."""

STEP_STARTED: Final = "step.started"
"""Written *before* a durable step of call ``execution_id`` runs (``ctx.step``):
``{"execution_id", "step", "key"}`` (``key``: ``<execution_id>:<step>``). Version 2:
an fxworld without steps must not re-run a resumable call."""
STEP_FINISHED: Final = "step.finished"
"""The step ``step`` of call ``execution_id`` returned ``result`` (JSON), which a
re-run of the call returns without running it: ``{"execution_id", "step", "result"}``."""

CHILD_STARTED: Final = "child.started"
"""A call of an agent tool (``agent.as_tool()``) made its child session, whose
first prompt is saved; the call now waits for the child's turn, holding no worker:
``{"execution_id", "call_id", "name", "session"}`` (``session``: the child's id).
Version 4."""
CHILD_FINISHED: Final = "child.finished"
"""The child session's turn ended; appended to the PARENT's log, unfenced, by the
worker that ended it, with a wake and keyed ``child:<execution_id>`` (written
once), and the call's result, as ``tool.finished``'s: ``{"execution_id",
"call_id", "name", "session", "outcome": "finished" | "failed" | "stopped",
"output", "is_error"}``. Version 4."""

ATTENTION_CLEARED: Final = "attention.cleared"
"""A person saw what the session's ended turns need (a failure, a tool error, a stop)
and cleared it, unfenced, from the inspector's sessions page, keyed
``clear:<upto>`` (a second click writes nothing): ``{"upto", "actor", "note"?}``
(``upto``: the seq the log stood at; ``actor``: who, as a decision's). Informational:
a turn neither reads nor replays it, so version 1."""

TURN_END_KINDS: Final = frozenset({TURN_FINISHED, TURN_FAILED, TURN_STOPPED})
"""The kinds that end a turn (``turn.yielded`` does not: the turn goes on)."""


_VERSION_2_KINDS: Final = frozenset(
    {
        APPROVAL_REQUESTED,
        APPROVAL_DECIDED,
        STOP_REQUESTED,
        TURN_STOPPED,
        STEP_STARTED,
        STEP_FINISHED,
    }
)


_VERSION_4_KINDS: Final = frozenset({CHILD_STARTED, CHILD_FINISHED})


def entry(kind: str, **data: Any) -> NewEntry:
    """A new entry of ``kind`` with ``data`` and the log version it needs (a
    prompt that makes a child session, with ``parent``: version 4)."""
    if kind in _VERSION_4_KINDS or (kind == PROMPT and "parent" in data):
        v = 4
    else:
        v = 3 if kind == OUTPUT_INVALID else 2 if kind in _VERSION_2_KINDS else 1
    body: JSONObject = {"v": v, **data}
    return NewEntry(kind, body)
