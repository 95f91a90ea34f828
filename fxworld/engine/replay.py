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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from fxworld.errors import WorldError
from fxworld.models.base import Message, ToolCall
from fxworld.types import Entry

from . import log

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
    "Step",
    "interrupted_message",
]


class NewerLogVersion(WorldError):
    """The log holds an entry written by a newer fxworld than this one."""


def interrupted_message(name: str, execution_id: str) -> str:
    """What the model hears about a non-idempotent call that may have partly run."""
    return (
        f"The call to tool {name!r} (execution_id {execution_id}) was started, but the "
        "process running it stopped before it finished. It may have partly run, or not "
        "at all. It was NOT run again: check its effect before retrying it, or ask the user."
    )


@dataclass
class CallState:
    """One tool call of the latest model message, and how far it got."""

    id: str
    name: str
    input: dict[str, Any]
    execution_id: str
    started: int = 0  # number of tool.started entries (runs begun)
    finished: bool = False
    interrupted: bool = False

    @property
    def resolved(self) -> bool:
        return self.finished or self.interrupted


@dataclass
class TurnState:
    """The turn in progress: which prompt it answers and where it stands."""

    prompt: int
    turn: str
    model_calls: int = 0
    open_call: str | None = None  # a model call with text chunks and no message yet
    calls: list[CallState] = field(default_factory=list)
    last_text: str = ""


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
        d = e.data
        if e.kind == log.FENCE:
            return
        v = d.get("v", 1)
        if isinstance(v, int) and v > log.LOG_VERSION:
            raise NewerLogVersion(
                f"entry {e.seq} of session {e.session_id!r} has log version {v}; "
                f"this fxworld reads up to {log.LOG_VERSION}: upgrade fxworld"
            )
        cur = self.current
        if e.kind == log.PROMPT:
            self.prompts[e.seq] = str(d.get("text", ""))
        elif e.kind == log.TURN_STARTED:
            p = int(d["prompt"])
            self.current = TurnState(prompt=p, turn=str(d.get("turn", "")))
            self.messages.append(Message("user", self.prompts.get(p, "")))
        elif cur is None:
            return  # entries outside a turn carry nothing for the conversation
        elif e.kind == log.TEXT:
            cur.open_call = str(d.get("call"))
        elif e.kind == log.TEXT_DISCARDED:
            if cur.open_call == d.get("call"):
                cur.open_call = None
        elif e.kind == log.MESSAGE:
            cur.open_call = None
            cur.model_calls += 1
            cur.last_text = str(d.get("text", ""))
            calls = [
                CallState(
                    id=str(c["id"]),
                    name=str(c["name"]),
                    input=dict(c.get("input") or {}),
                    execution_id=str(c["execution_id"]),
                )
                for c in d.get("tool_calls") or []
            ]
            cur.calls = calls
            self.messages.append(
                Message(
                    "assistant",
                    cur.last_text,
                    tool_calls=tuple(ToolCall(c.id, c.name, c.input) for c in calls),
                )
            )
        elif e.kind == log.TOOL_STARTED:
            call = self._call(cur, d)
            if call is not None:
                call.started += 1
        elif e.kind == log.TOOL_FINISHED:
            call = self._call(cur, d)
            if call is not None and not call.resolved:
                call.finished = True
                self.messages.append(
                    Message(
                        "tool",
                        str(d.get("output", "")),
                        tool_call_id=call.id,
                        is_error=bool(d.get("is_error", False)),
                    )
                )
        elif e.kind == log.TOOL_INTERRUPTED:
            call = self._call(cur, d)
            if call is not None and not call.resolved:
                call.interrupted = True
                text = str(d.get("message") or interrupted_message(call.name, call.execution_id))
                self.messages.append(Message("tool", text, tool_call_id=call.id, is_error=True))
        elif e.kind in log.TURN_END_KINDS:
            self.answered.add(int(d["prompt"]))
            if cur.prompt == int(d["prompt"]):
                self.current = None

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


Step = Idle | StartTurn | DiscardText | RunTools | InterruptTool | CallModel | FinishTurn


def next_step(state: Replay, idempotent: Mapping[str, bool]) -> Step:
    """What the worker does next, given the state and which tools are idempotent.

    A call started but not finished runs again if its tool is idempotent, and is
    marked interrupted otherwise (an unknown tool counts as not idempotent). The
    calls of one message that are to run, run together.
    """
    cur = state.current
    if cur is None:
        p = state.pending_prompt()
        return Idle() if p is None else StartTurn(p)
    if cur.open_call is not None:
        return DiscardText(cur.open_call)
    pending = [c for c in cur.calls if not c.resolved]
    for call in pending:
        if call.started > 0 and not idempotent.get(call.name, False):
            return InterruptTool(call)
    if pending:
        return RunTools(tuple((c, c.started + 1) for c in pending))
    if cur.model_calls > 0 and not cur.calls:
        return FinishTurn(cur.last_text)
    return CallModel()
