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

This module imports only the log format, so the command line can build its parser
with it without loading the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Literal

from fxworld.types import Entry

from . import log

__all__ = ["State", "STATES", "PREVIEW", "Summary", "summarize", "nested_state"]

State = Literal["running", "waiting for approval", "idle", "failed", "stopped"]
STATES: Final[tuple[State, ...]] = ("running", "waiting for approval", "idle", "failed", "stopped")
"""A session's states, in the words the inspector and the command line use."""

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
        if e.kind == log.PROMPT:
            self.last_prompt = e.seq
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
        elif e.kind in log.TURN_END_KINDS:
            self.running, self.requested, self.parked = False, {}, False
            self.children = {}
            self.ended = e.kind.partition(".")[2]


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


def _time(value: object) -> datetime | None:
    """An ISO 8601 time as the log holds it (``None``: none, or not one)."""
    try:
        at = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return at if at is None or at.tzinfo is not None else at.replace(tzinfo=UTC)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
