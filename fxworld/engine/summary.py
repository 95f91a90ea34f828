"""What a session's log says of it, folded one entry at a time: :class:`Summary`.

The one place that reads a session's state from its log: ``fxworld sessions
list`` and ``show`` (:func:`summarize`) and the inspector's pages (a
:class:`Summary` per session, kept up to date by :mod:`fxworld.web`'s index)
say the same words for the same log. A state is one of :data:`STATES`:

- ``waiting for approval``: a call of the running turn waits for a person's
  decision, and its ``approval_timeout`` has not passed; with
  :func:`nested_state`, also a turn whose agent tool waits for a child session
  that waits for one (a child's approval is its parent's business);
- ``running``: a turn runs (or waits for the worker it was handed on to), or a
  prompt waits for its turn;
- ``failed`` / ``stopped``: how the last turn ended;
- ``idle``: anything else (every turn finished, or no prompt yet).

Beside its state, a session may need a person (:attr:`Summary.attention`, the
words of :data:`ATTENTION`): a call waits for a decision (``waiting``), or a turn
ended ``failed``, ``stopped``, with a tool error (``tool-error``: a call's
``tool.finished`` or ``child.finished`` with ``is_error``) or with something cut
(``interrupted``: a ``tool.interrupted``, or a step started and never finished).
Those marks of ended turns stay, turn after turn, until a turn ends clean or a
person clears them (``attention.cleared``); ``stuck`` is the inspector's, from the
world's wakes, not from the log.

This module imports only the log format, so the command line can build its parser
with it without loading the engine.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from fxworld.types import Entry

from . import log

__all__ = [
    "State",
    "STATES",
    "PREVIEW",
    "ATTENTION",
    "Summary",
    "summarize",
    "nested_state",
    "agent_of",
    "context_matches",
]

State = Literal["running", "waiting for approval", "idle", "failed", "stopped"]
STATES: Final[tuple[State, ...]] = ("running", "waiting for approval", "idle", "failed", "stopped")
"""A session's states, in the words the inspector and the command line use."""

ATTENTION: Final[dict[str, str]] = {
    "waiting": "waiting for approval",
    "stuck": "stuck",
    "failed": "failed",
    "tool-error": "tool error",
    "interrupted": "interrupted",
    "stopped": "stopped",
}
"""What may make a session need a person: its name (in a URL, on the command line)
-> its words on a page. See the module."""

PREVIEW: Final = 100
"""Characters of a session's first prompt its summary keeps (the sessions page shows them)."""


@dataclass
class Summary:
    """One session as its log says so far (``seq``: the last entry folded)."""

    session_id: str
    seq: int = 0
    last_at: datetime | None = None
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    epoch: int = 0
    #: the seq of the newest prompt, and of the prompt the newest turn answers
    last_prompt: int = 0
    answering: int = 0
    #: a turn started and has not ended; how the last one ended
    running: bool = False
    ended: str = ""
    #: the running turn waits (for a decision, a child session, or the worker it was
    #: handed on to)
    parked: bool = False
    #: fences that landed inside a running turn: its worker died or lost its lease
    takeovers: int = 0
    #: the first prompt: its seq and the start of its text (the sessions page shows it)
    first_prompt: int = 0
    preview: str = ""
    #: execution id -> (tool name, expires at, seq of its ``approval.requested``)
    requested: dict[str, tuple[str, datetime | None, int]] = field(default_factory=dict)
    #: execution id -> the child session the running turn's agent-tool call waits for
    children: dict[str, str] = field(default_factory=dict)
    #: the agent that owns it (its prompts' ``agent``), its context (its first
    #: entry's) and, for a child session, its parent's id
    agent: str | None = None
    context: dict[str, Any] | None = None
    parent: str | None = None
    #: the attention marks of ended turns (see the module), and those of the running
    #: turn so far; the keys of the steps started and not finished in it
    marks: set[str] = field(default_factory=set)
    trouble: set[str] = field(default_factory=set)
    open_steps: set[str] = field(default_factory=set)
    #: the last ``attention.cleared``: the seq it cleared up to, and its own seq
    cleared: tuple[int, int] = (0, 0)

    @property
    def attention(self) -> tuple[str, ...]:
        """Why this session needs a person now (names of :data:`ATTENTION`, in its
        order; ``stuck`` aside); empty when it does not."""
        now = self.marks | ({"waiting"} if self.waiting else set())
        return tuple(name for name in ATTENTION if name in now)

    @property
    def waiting(self) -> dict[str, str]:
        """Execution id -> tool name of the calls that wait for a decision now: past
        its ``expires_at`` a call is not pending (its timeout denies it)."""
        if not self.requested:
            return {}
        now = datetime.now(UTC)
        return {
            eid: name
            for eid, (name, expires, _) in self.requested.items()
            if expires is None or expires > now
        }

    def requested_seq(self, execution_id: str) -> int:
        """The seq of the ``approval.requested`` entry of a waiting call (0: none)."""
        return self.requested.get(execution_id, ("", None, 0))[2]

    @property
    def state(self) -> State:
        """The session's state now (see the module)."""
        if self.waiting:
            return "waiting for approval"
        if self.running or self.last_prompt > self.answering:
            return "running"
        if self.ended in ("failed", "stopped"):
            return "failed" if self.ended == "failed" else "stopped"
        return "idle"

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def apply(self, e: Entry) -> None:
        """Fold entry ``e`` (the next one of the log) in."""
        self.seq, self.last_at = e.seq, e.at
        d = e.data
        if e.seq == 1:
            context, parent = d.get("context"), d.get("parent")
            self.context = context if isinstance(context, dict) else None
            if e.kind == log.PROMPT and isinstance(parent, dict):
                self.parent = str(parent.get("session")) if parent.get("session") else None
        if e.kind == log.PROMPT:
            self.last_prompt = e.seq
            self.agent = self.agent or agent_of(d)
            if not self.first_prompt:
                self.first_prompt, self.preview = e.seq, str(d.get("text", ""))[:PREVIEW]
        elif e.kind == log.FENCE:
            self.epoch = max(self.epoch, _int(d.get("epoch")))
            if self.running and not self.parked:
                self.takeovers += 1
            self.parked = False
        elif e.kind in (log.TURN_YIELDED, log.CHILD_STARTED):  # the turn waits, held by none
            self.parked = self.running
            if e.kind == log.CHILD_STARTED and self.running:
                self.children[str(d.get("execution_id"))] = str(d.get("session"))
        elif e.kind == log.TURN_STARTED:
            self.turns += 1
            self.running, self.requested, self.parked = True, {}, False
            self.children = {}
            self.trouble, self.open_steps = set(), set()
            self.answering = max(self.answering, _int(d.get("prompt")))
        elif e.kind == log.MESSAGE and isinstance(d.get("usage"), dict):
            self.input_tokens += _int(d["usage"].get("input_tokens"))
            self.output_tokens += _int(d["usage"].get("output_tokens"))
        elif e.kind == log.APPROVAL_REQUESTED and self.running:
            self.parked = True
            expires = _time(d.get("expires_at"))
            self.requested[str(d.get("execution_id"))] = (str(d.get("name")), expires, e.seq)
        elif e.kind == log.APPROVAL_DECIDED:
            self.requested.pop(str(d.get("execution_id")), None)
        elif e.kind == log.CHILD_FINISHED:
            self.children.pop(str(d.get("execution_id")), None)
            self._trouble(e)
        elif e.kind in log.TURN_END_KINDS:
            self.running, self.requested, self.parked = False, {}, False
            self.children = {}
            self.ended = e.kind.partition(".")[2]
            self._end_marks()
        else:
            self._trouble(e)

    def _trouble(self, e: Entry) -> None:
        """What entry ``e`` of a running turn says went wrong in it."""
        d = e.data
        if e.kind in (log.TOOL_FINISHED, log.CHILD_FINISHED) and d.get("is_error") is True:
            self.trouble.add("tool-error")
        elif e.kind == log.TOOL_INTERRUPTED:
            self.trouble.add("interrupted")
        elif e.kind == log.STEP_STARTED:
            self.open_steps.add(str(d.get("key") or f"{d.get('execution_id')}:{d.get('step')}"))
        elif e.kind == log.STEP_FINISHED:
            self.open_steps.discard(f"{d.get('execution_id')}:{d.get('step')}")
        elif e.kind == log.ATTENTION_CLEARED:
            self.marks, self.cleared = set(), (_int(d.get("upto")), e.seq)

    def _end_marks(self) -> None:
        """The turn ended: its marks join the session's; a clean end clears them."""
        marks = self.trouble | ({"interrupted"} if self.open_steps else set())
        if self.ended in ("failed", "stopped"):
            marks.add(self.ended)
        self.marks = self.marks | marks if marks else set()
        self.trouble, self.open_steps = set(), set()


def nested_state(summary: Summary, state_of: Callable[[str], State | None]) -> State:
    """``summary``'s state, counting its children's approvals as its own: a running
    turn whose agent tool waits for a child that waits for approval (``state_of``
    gives a child session's state, nested the same way; ``None``: unknown) is
    ``waiting for approval``."""
    own = summary.state
    if own == "running" and any(
        state_of(child) == "waiting for approval" for child in summary.children.values()
    ):
        return "waiting for approval"
    return own


def summarize(session_id: str, entries: Iterable[Entry]) -> Summary:
    """The summary of session ``session_id`` whose log, from its start, is ``entries``."""
    summary = Summary(session_id)
    for e in entries:
        summary.apply(e)
    return summary


def agent_of(data: Any) -> str | None:
    """The agent a prompt's data names (``agent``), or ``None`` when it names none."""
    agent = data.get("agent") if isinstance(data, dict) else None
    return agent if isinstance(agent, str) and agent else None


def context_matches(context: Any, key: str, value: str) -> bool:
    """Whether a session's ``context`` holds ``key`` with ``value`` (compared as text:
    ``tenant=acme``, ``user=42``)."""
    if not isinstance(context, dict) or key not in context:
        return False
    found = context[key]
    return (found if isinstance(found, str) else json.dumps(found)) == value


def _time(value: object) -> datetime | None:
    """An ISO 8601 time as the log holds it (``None``: none, or not one)."""
    try:
        at = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return at if at is None or at.tzinfo is not None else at.replace(tzinfo=UTC)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
