"""Rebuilding a session from its log: the state a worker continues from, and the
conversation the model hears.

:class:`Replay` is the one place where log entries become :class:`Message` values
(:func:`conversation` is its shortcut). Text chunks never reach the conversation:
the ``message`` entry carries the model's whole text, so the text of a call cut by
a crash (marked ``text.discarded``) is left out. A non-idempotent call found
started but not finished becomes a ``tool.interrupted`` entry, which the model
hears as a tool result with ``is_error=True`` saying the call may have partly run.

:func:`next_step` reads the rebuilt state and says what the worker does next.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, overload

from fxworld.errors import WorldError
from fxworld.models.base import Message, ToolCall
from fxworld.types import Entry

from . import clock, log
from .cut_notes import steps_note
from .typed_output import retry_message

__all__ = [
    "Replay",
    "Conversation",
    "conversation",
    "next_step",
    "CallState",
    "TurnState",
    "Idle",
    "StartTurn",
    "DiscardText",
    "RunTools",
    "InterruptTool",
    "CallModel",
    "FinishTurn",
    "RequestApproval",
    "TimeOutApproval",
    "WaitForApproval",
    "WaitForChild",
    "StopTurn",
    "Step",
    "RunEnd",
    "end_of",
    "interrupted_message",
    "denied_message",
    "stopped_message",
    "expiry_reason",
    "agent_path",
]


class NewerLogVersion(WorldError):
    """The log holds an entry written by a newer fxworld than this one."""


def interrupted_message(
    name: str, execution_id: str, finished: Sequence[str] = (), cut: Sequence[str] = ()
) -> str:
    """What the model hears about a non-idempotent call that may have partly run,
    with its durable steps that ``finished`` and those ``cut`` (started, not finished)."""
    steps = steps_note(finished, cut)
    return (
        f"The call to tool {name!r} (execution_id {execution_id}) was started, but the "
        "process running it stopped before it finished. It may have partly run, or not "
        f"at all. {steps + ' ' if steps else ''}It was NOT run again: check its effect "
        "before retrying it, or ask the user."
    )


def denied_message(name: str, reason: str | None) -> str:
    """What the model hears about a call a person denied (or left undecided)."""
    why = f": {reason}" if reason else ""
    return f"The call to tool {name!r} was not run: it was denied{why}."


def expiry_reason(timeout: float | None) -> str:
    """The reason of the denial a call's ``approval_timeout`` decides."""
    return f"no decision within {timeout or 0:g} s"


def stopped_message(name: str) -> str:
    """What the model hears about a call the user's stop left unrun or cut."""
    return (
        f"The call to tool {name!r} did not complete: the user stopped the turn "
        "(if it had started, it may have partly run)."
    )


STOPPED_NOTE = "[The user stopped your previous answer before it was finished.]"
"""What the model hears, before the next prompt, after a turn was stopped."""


@dataclass
class CallState:
    """One tool call of the latest model message, and how far it got."""

    id: str
    """The model provider's id of the call, which the tool's result answers."""
    name: str
    """The tool's name, as the model asked for it."""
    input: dict[str, Any]
    """The tool's input, as the model gave it."""
    execution_id: str
    """The engine's own id of the call, saved with the model's message: its entries,
    approvals and durable steps name it."""
    started: int = 0
    """The number of its ``tool.started`` entries: runs begun."""
    finished: bool = False
    """Whether a ``tool.finished`` entry gave its result."""
    interrupted: bool = False
    """Whether it ended without a result of its own: a ``tool.interrupted`` entry, or
    its turn was stopped (the model is told so)."""
    approval: str | None = None
    """``None`` (not asked), ``"requested"``, ``"approved"`` or ``"denied"``: the
    first ``approval.decided`` wins."""
    requested_at: datetime | None = None
    """When its ``approval.requested`` entry was committed."""
    expires_at: datetime | None = None
    """When the wait for a decision ends (then it is denied), or ``None``: no timeout."""
    timeout: float | None = None
    """The tool's approval timeout in seconds, as saved with the request."""
    requested_seq: int = 0
    """The seq of the call's ``approval.requested`` entry (0: not asked)."""
    steps_started: set[str] = field(default_factory=set)
    """The names of its durable steps with a ``step.started`` entry."""
    step_results: dict[str, Any] = field(default_factory=dict)
    """The saved result of each of its durable steps that finished."""
    step_errors: dict[str, str] = field(default_factory=dict)
    """Why the result of each of its steps that ran and whose result could not be
    saved (``step.finished`` with ``error``) was not saved."""
    child: str | None = None
    """The child session a call of an agent tool runs in, once its ``child.started``
    is saved: the call then waits for the child's ``child.finished``."""

    @property
    def resolved(self) -> bool:
        return self.finished or self.interrupted or self.approval == "denied"

    @property
    def steps_cut(self) -> list[str]:
        """Its durable steps started and not finished (they may have partly run), by name."""
        return sorted(self.steps_started - self.step_results.keys())

    def expired(self, now: datetime) -> bool:
        """Whether the call waits for a decision past its ``expires_at``."""
        return (
            self.approval == "requested" and self.expires_at is not None and self.expires_at <= now
        )


@dataclass
class TurnState:
    """The turn in progress: which prompt it answers and where it stands."""

    prompt: int
    turn: str
    model_calls: int = 0
    open_call: str | None = None  # a model call with text chunks and no message yet
    open_text: str = ""  # the text chunks of open_call
    calls: list[CallState] = field(default_factory=list)
    last_text: str = ""
    stop: bool = False  # stop.requested for this turn
    stop_reason: str | None = None
    trace: dict[str, Any] = field(default_factory=dict)
    """The trace context of the span that started the turn (``turn.started``), if any."""
    last_call: str = ""
    """The model call of the latest ``message``."""
    output_tries: int = 0
    """The ``output.invalid`` entries of this turn (answers that did not validate)."""
    output_refused: bool = False
    """The latest answer did not validate: the model is asked again."""
    max_model_calls: int | None = None
    """The model-call limit its prompt saved (``None``: the agent's applies)."""


class Conversation(Sequence[Message]):
    """The first ``n`` messages of a conversation that only ever grows: a snapshot
    made in O(1), so a model call does not copy the whole conversation each step."""

    __slots__ = ("_messages", "_n")

    def __init__(self, messages: list[Message], n: int) -> None:
        self._messages = messages
        self._n = n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> Message: ...
    @overload
    def __getitem__(self, i: slice) -> list[Message]: ...
    def __getitem__(self, i: int | slice) -> Message | list[Message]:
        if isinstance(i, slice):
            return self._messages[: self._n][i]
        if not -self._n <= i < self._n:
            raise IndexError("conversation index out of range")
        return self._messages[i % self._n]

    def __iter__(self) -> Iterator[Message]:
        return itertools.islice(self._messages, self._n)

    def __repr__(self) -> str:
        return f"Conversation({len(self)} messages)"


@dataclass
class Replay:
    """The state of a session, built by applying its log entries in order."""

    last_seq: int = 0
    prompts: dict[int, str] = field(default_factory=dict)
    answered: set[int] = field(default_factory=set)
    current: TurnState | None = None
    messages: list[Message] = field(default_factory=list)
    stops: dict[int, str | None] = field(default_factory=dict)  # for turns not started yet
    was_stopped: bool = False  # the last turn ended with turn.stopped
    prompt_trace: dict[int, dict[str, Any]] = field(default_factory=dict)
    """The trace context each prompt's caller had, by the prompt's seq (if any)."""
    prompt_limits: dict[int, int] = field(default_factory=dict)
    """The ``max_model_calls`` a prompt saved, by the prompt's seq (if any)."""
    last_end: str | None = None
    """The kind of the entry that ended the latest turn."""
    context: dict[str, Any] | None = None
    """The session's context, saved in its first entry (``None``: it has none)."""
    parent: dict[str, Any] | None = None
    """A child session's parent call, saved in its first prompt (``None``: not a child)."""
    parent_answer: Entry | None = None
    """A child session's answer to its parent: the end of the turn of its first prompt."""
    first_agent: str | None = None
    """The agent its first entry names (a prompt's or a fork's ``agent``): the agent
    that made the session (``None``: written before agents were recorded)."""
    agent_path: tuple[str, ...] = ()
    """The agent tools from the worker's agent to the one that runs this session: a
    child's, or a fork's of a child (:func:`agent_path`; ``()``: the worker's own)."""

    def conversation(self) -> Conversation:
        """The conversation as it stands now (later entries do not change it)."""
        return Conversation(self.messages, len(self.messages))

    def apply_all(self, entries: Iterable[Entry]) -> Replay:
        for e in entries:
            self.apply(e)
        return self

    def apply(self, e: Entry) -> None:
        """Apply one entry. Entries must come in log order, each exactly once."""
        if e.seq != self.last_seq + 1:
            raise WorldError(
                f"session {e.session_id!r}: replay expected entry {self.last_seq + 1}, "
                f"got {e.seq} (a world that breaks W9?)"
            )
        self.last_seq = e.seq
        if e.kind == log.FENCE:
            return
        if e.seq == 1:
            self._first(e)
        v = e.data.get("v", 1)
        if isinstance(v, int) and v > log.LOG_VERSION:
            raise NewerLogVersion(
                f"entry {e.seq} of session {e.session_id!r} has log version {v}; "
                f"this fxworld reads up to {log.LOG_VERSION}: upgrade fxworld"
            )
        if e.kind == log.PROMPT:
            self.prompts[e.seq] = str(e.data.get("text", ""))
            trace = e.data.get("trace")
            if isinstance(trace, dict):
                self.prompt_trace[e.seq] = trace
            limit = e.data.get("max_model_calls")
            if isinstance(limit, int) and not isinstance(limit, bool):
                self.prompt_limits[e.seq] = limit
        elif e.kind == log.TURN_STARTED:
            self._start_turn(e.data)
        elif e.kind == log.STOP_REQUESTED:
            self._apply_stop(e.data)
        elif self.current is not None:  # outside a turn, entries carry nothing more
            apply = _IN_TURN.get(e.kind)
            if apply is not None:
                apply(self, self.current, e)

    def _first(self, e: Entry) -> None:
        """The session's first entry: its context and, for a child, its parent call."""
        if isinstance(e.data.get("context"), dict):
            self.context = e.data["context"]  # a prompt's or a fork's: never changes
        if e.kind == log.PROMPT and isinstance(e.data.get("parent"), dict):
            self.parent = e.data["parent"]
        self.agent_path = agent_path(e)
        made_by = e.data.get("agent")
        self.first_agent = made_by if isinstance(made_by, str) else None

    def _start_turn(self, d: Mapping[str, Any]) -> None:
        p = int(d["prompt"])
        trace = d.get("trace")
        self.current = TurnState(
            p,
            str(d.get("turn", "")),
            trace=trace if isinstance(trace, dict) else {},
            max_model_calls=self.prompt_limits.get(p),
        )
        text = self.prompts.get(p, "")
        if self.was_stopped:
            text, self.was_stopped = f"{STOPPED_NOTE}\n\n{text}", False
        self.messages.append(Message("user", text))
        if p in self.stops:
            self.current.stop, self.current.stop_reason = True, self.stops.pop(p)

    def _text(self, cur: TurnState, e: Entry) -> None:
        call_id = str(e.data.get("call"))
        if cur.open_call != call_id:
            cur.open_call, cur.open_text = call_id, ""
        cur.open_text += str(e.data.get("text", ""))

    def _text_discarded(self, cur: TurnState, e: Entry) -> None:
        if cur.open_call == e.data.get("call"):
            cur.open_call, cur.open_text = None, ""

    def _message(self, cur: TurnState, e: Entry) -> None:
        d = e.data
        cur.open_call, cur.open_text = None, ""
        cur.model_calls += 1
        cur.last_call, cur.output_refused = str(d.get("call", "")), False
        cur.last_text = str(d.get("text", ""))
        cur.calls = [
            CallState(
                id=str(c["id"]),
                name=str(c["name"]),
                input=dict(c.get("input") or {}),
                execution_id=str(c["execution_id"]),
            )
            for c in d.get("tool_calls") or []
        ]
        calls = tuple(ToolCall(c.id, c.name, c.input) for c in cur.calls)
        self.messages.append(Message("assistant", cur.last_text, tool_calls=calls))

    def _tool_started(self, cur: TurnState, e: Entry) -> None:
        call = self._call(cur, e.data)
        if call is not None:
            call.started += 1

    def _tool_finished(self, cur: TurnState, e: Entry) -> None:
        call = self._call(cur, e.data)
        if call is not None and not call.resolved:
            call.finished = True
            output, is_error = str(e.data.get("output", "")), bool(e.data.get("is_error", False))
            self.messages.append(Message("tool", output, tool_call_id=call.id, is_error=is_error))

    def _tool_interrupted(self, cur: TurnState, e: Entry) -> None:
        call = self._call(cur, e.data)
        if call is not None and not call.resolved:
            call.interrupted = True
            text = str(e.data.get("message") or interrupted_message(call.name, call.execution_id))
            self.messages.append(Message("tool", text, tool_call_id=call.id, is_error=True))

    def _output_invalid(self, cur: TurnState, e: Entry) -> None:
        if e.data.get("call") == cur.last_call and not cur.output_refused:
            cur.output_tries += 1
            cur.output_refused = True
            self.messages.append(Message("user", retry_message(str(e.data.get("error", "")))))

    def _step(self, cur: TurnState, e: Entry) -> None:
        call = self._call(cur, e.data)
        if call is not None:
            name = str(e.data.get("step"))
            if e.kind == log.STEP_STARTED:
                call.steps_started.add(name)
            elif "error" in e.data and "result" not in e.data:
                call.step_errors[name] = str(e.data["error"])
            else:
                call.step_results[name] = e.data.get("result")

    def _child_started(self, cur: TurnState, e: Entry) -> None:
        call = self._call(cur, e.data)
        if call is not None and not call.resolved:
            call.child = str(e.data.get("session"))

    def _turn_ended(self, cur: TurnState, e: Entry) -> None:
        prompt = int(e.data["prompt"])
        if prompt == 1 and self.parent is not None and self.parent_answer is None:
            self.parent_answer = e
        self.answered.add(prompt)
        self.last_end = e.kind
        if cur.prompt == prompt:
            if e.kind == log.TURN_STOPPED:
                self._close_stopped(cur)
            self.current = None

    # -- approvals and stop ------------------------------------------------------------

    def _approval(self, cur: TurnState, e: Entry) -> None:
        """``approval.requested`` parks a call; the first ``approval.decided`` on it
        wins (a denial is the call's result); later ones change nothing."""
        call = self._call(cur, e.data)
        if call is None or call.resolved:
            return
        if e.kind == log.APPROVAL_REQUESTED and call.approval is None:
            call.approval, call.requested_at, call.requested_seq = "requested", e.at, e.seq
            expires = e.data.get("expires_at")
            call.expires_at = datetime.fromisoformat(str(expires)) if expires else None
            timeout = e.data.get("timeout")
            call.timeout = float(timeout) if isinstance(timeout, (int, float)) else None
        elif e.kind == log.APPROVAL_DECIDED and call.approval == "requested":
            if e.data.get("approved") is True:
                call.approval = "approved"
                return
            call.approval = "denied"
            reason = e.data.get("reason")
            text = denied_message(call.name, None if reason is None else str(reason))
            self.messages.append(Message("tool", text, tool_call_id=call.id, is_error=True))

    def _apply_stop(self, d: Mapping[str, Any]) -> None:
        p = int(d["prompt"])
        reason = d.get("reason")
        why = None if reason is None else str(reason)
        cur = self.current
        if cur is not None and cur.prompt == p:
            if not cur.stop:
                cur.stop, cur.stop_reason = True, why
        elif p not in self.answered:
            self.stops.setdefault(p, why)

    def _close_stopped(self, cur: TurnState) -> None:
        """A stopped turn in the conversation: every call left open gets a result
        (the provider needs one per call), and text cut mid-stream stays as the
        assistant's message; the next prompt carries :data:`STOPPED_NOTE`."""
        for call in cur.calls:
            if not call.resolved:
                call.interrupted = True
                text = stopped_message(call.name)
                self.messages.append(Message("tool", text, tool_call_id=call.id, is_error=True))
        if cur.open_call is not None and cur.open_text:
            self.messages.append(Message("assistant", cur.open_text))
        self.was_stopped = True

    @staticmethod
    def _call(cur: TurnState, d: Mapping[str, Any]) -> CallState | None:
        xid = d.get("execution_id")
        for c in cur.calls:
            if c.execution_id == xid:
                return c
        return None

    def pending_prompt(self) -> int | None:
        """The seq of the oldest prompt no turn has answered yet, if any."""
        waiting = [p for p in self.prompts if p not in self.answered]
        return min(waiting) if waiting else None


_IN_TURN: dict[str, Callable[[Replay, TurnState, Entry], None]] = {
    log.TEXT: Replay._text,
    log.TEXT_DISCARDED: Replay._text_discarded,
    log.MESSAGE: Replay._message,
    log.TOOL_STARTED: Replay._tool_started,
    log.TOOL_FINISHED: Replay._tool_finished,
    log.TOOL_INTERRUPTED: Replay._tool_interrupted,
    log.APPROVAL_REQUESTED: Replay._approval,
    log.APPROVAL_DECIDED: Replay._approval,
    log.OUTPUT_INVALID: Replay._output_invalid,
    log.STEP_STARTED: Replay._step,
    log.STEP_FINISHED: Replay._step,
    log.CHILD_STARTED: Replay._child_started,
    log.CHILD_FINISHED: Replay._tool_finished,  # the child's answer is the call's result
    **dict.fromkeys(log.TURN_END_KINDS, Replay._turn_ended),
}
"""How each kind of entry inside a turn changes the state (other kinds: not at all)."""


def agent_path(first: Entry) -> tuple[str, ...]:
    """The agent path a session's first entry names: a child's first prompt's
    ``parent.path``, or the ``agents`` a fork of a child keeps (``()``: none)."""
    d = first.data
    parent = d.get("parent") if first.kind == log.PROMPT else None
    path = parent.get("path") if isinstance(parent, dict) else d.get("agents")
    if first.kind not in (log.PROMPT, log.FORKED) or not isinstance(path, list):
        return ()
    return tuple(str(name) for name in path)


def conversation(entries: Iterable[Entry]) -> list[Message]:
    """The conversation a log holds, as the model hears it."""
    return Replay().apply_all(entries).messages


# -- what to do next ------------------------------------------------------------------


@dataclass(frozen=True)
class Idle:
    """Nothing to do: every prompt is answered."""


@dataclass(frozen=True)
class StartTurn:
    prompt: int


@dataclass(frozen=True)
class DiscardText:
    call: str


@dataclass(frozen=True)
class RunTools:
    """Run these calls of one message at the same time, each with its attempt
    number (1 the first time; more when an idempotent call runs again)."""

    runs: tuple[tuple[CallState, int], ...]


@dataclass(frozen=True)
class InterruptTool:
    call: CallState


@dataclass(frozen=True)
class CallModel:
    pass


@dataclass(frozen=True)
class FinishTurn:
    text: str


@dataclass(frozen=True)
class RequestApproval:
    """Park these calls (of tools with ``needs_approval``) for a person."""

    calls: tuple[CallState, ...]


@dataclass(frozen=True)
class TimeOutApproval:
    """No decision came by the call's ``expires_at``: decide it denied."""

    call: CallState
    reason: str


@dataclass(frozen=True)
class WaitForApproval:
    """Nothing runs until a person decides: finish the wake and hold nothing; a
    wake is due at ``due`` (the first expiry), if any."""

    due: datetime | None


@dataclass(frozen=True)
class WaitForChild:
    """Nothing runs until these child sessions answer: finish the wake and hold
    nothing (each child's ``child.finished`` lands with a wake)."""

    sessions: tuple[str, ...]


@dataclass(frozen=True)
class StopTurn:
    """``stop.requested`` for this turn: end it with ``turn.stopped``."""

    text: str
    reason: str | None


Step = (
    Idle
    | StartTurn
    | DiscardText
    | RunTools
    | InterruptTool
    | CallModel
    | FinishTurn
    | RequestApproval
    | TimeOutApproval
    | WaitForApproval
    | WaitForChild
    | StopTurn
)


RunEnd = Literal["done", "waiting", "yielded", "pending"]
"""How a session's run ended, as a queue consumer needs it: ``"done"`` (no turn runs
and no prompt waits), ``"waiting"`` (its turn waits for a person's decision or for
its child sessions: nothing runs until one comes), ``"yielded"`` (its turn yielded
and the wake it left was pushed, with no push failed: a message of its own
continues it) or ``"pending"`` (anything else: work is left that nothing pushed)."""


def end_of(step: Step) -> RunEnd:
    """What a session whose next step is ``step`` ended as (never ``"yielded"``:
    only a run knows that it pushed)."""
    if isinstance(step, Idle):
        return "done"
    return "waiting" if isinstance(step, WaitForApproval | WaitForChild) else "pending"


def next_step(
    state: Replay,
    idempotent: Mapping[str, bool],
    approval_timeouts: Mapping[str, float | None] | None = None,
    now: datetime | None = None,
) -> Step:
    """What the worker does next, given the state and which tools are idempotent.

    A call started but not finished runs again if its tool is idempotent, and is
    marked interrupted otherwise (an unknown tool counts as not idempotent). The
    calls of one message that are to run, run together.

    ``approval_timeouts``: the tools that need approval now, each with its timeout
    (``None``: none), which decides the calls not asked yet. A call the log shows
    in the ``approval.requested`` state runs only after an approving decision,
    whatever the tools say now (a redeploy may have dropped ``needs_approval``),
    and expires at the ``expires_at`` it was asked with; ``now`` decides which
    approvals have expired. Likewise a call with ``child.started`` waits for its
    child's answer, whatever the tools say now.
    """
    cur = state.current
    if cur is None:
        p = state.pending_prompt()
        return Idle() if p is None else StartTurn(p)
    if cur.stop:
        return StopTurn(cur.open_text if cur.open_call else cur.last_text, cur.stop_reason)
    if cur.open_call is not None:
        return DiscardText(cur.open_call)
    pending = [c for c in cur.calls if not c.resolved]
    for call in pending:
        if call.started > 0 and call.child is None and not idempotent.get(call.name, False):
            return InterruptTool(call)
    waits = _approval_step(pending, approval_timeouts or {}, now or clock.now())
    if waits is not None:
        return waits
    if pending:
        return RunTools(tuple((c, c.started + 1) for c in pending))
    if cur.model_calls > 0 and not cur.calls and not cur.output_refused:
        return FinishTurn(cur.last_text)
    return CallModel()


def _approval_step(
    pending: list[CallState], timeouts: Mapping[str, float | None], now: datetime
) -> Step | None:
    """The approval steps, before any call of the message runs: ask for the calls
    not asked yet, time out the expired ones, run the calls that may run, and wait
    when only undecided calls, or calls waiting for their child session, are left.
    ``pending`` is narrowed in place to the calls that may run now."""
    ask = [c for c in pending if c.name in timeouts and c.approval is None and c.started == 0]
    if ask:
        return RequestApproval(tuple(ask))
    waiting = [c for c in pending if c.approval == "requested"]  # by the log, not the tools
    for c in waiting:
        if c.expired(now):
            return TimeOutApproval(c, expiry_reason(c.timeout))
    children = tuple(c.child for c in pending if c.child is not None)
    pending[:] = [c for c in pending if c.approval != "requested" and c.child is None]
    if pending or not (waiting or children):
        return None
    if not waiting:
        return WaitForChild(children)
    due = [c.expires_at for c in waiting if c.expires_at is not None]
    return WaitForApproval(min(due) if due else None)
