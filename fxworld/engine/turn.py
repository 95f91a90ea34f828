"""A turn as the prompting side sees it: accepted once saved, done once answered."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, cast

from typing_extensions import TypeVar

from fxworld.errors import WorldError

from . import log
from .cursor import encode_cursor
from .events import StreamEvent
from .typed_output import output_value

__all__ = [
    "Accepted",
    "Turn",
    "TurnFailed",
    "TurnStopped",
    "TooManyModelCalls",
    "PromptedSession",
    "prompts_in_flight",
]

OutputT = TypeVar("OutputT", default=str)

_in_flight: set[asyncio.Task[Accepted]] = set()
"""The prompt appends this process has started and that have not finished yet."""


def prompts_in_flight() -> set[asyncio.Task[Accepted]]:
    """The prompt appends still running on the current event loop: ``work()`` waits for
    them first, so a prompt sent just before it is seen (prompt, then work until idle)."""
    loop = asyncio.get_running_loop()
    return {t for t in _in_flight if t.get_loop() is loop}


class PromptedSession(Protocol):
    """What a turn needs of its session (a :class:`~fxworld.engine.session.Session`
    has it)."""

    @property
    def id(self) -> str: ...

    @property
    def output_type(self) -> type[Any] | None: ...

    async def append_prompt(
        self, text: str, key: str, *, max_model_calls: int | None = None
    ) -> int: ...

    def stream(self, cursor: str | None = None) -> AsyncGenerator[StreamEvent, None]: ...


@dataclass(frozen=True)
class Accepted:
    """The prompt is durably saved: it will be answered even if this process dies.

    ``cursor`` stands at the prompt itself: ``session.stream(cursor)`` yields what
    came after it (the turn that answers it, and anything later), and
    ``session.stream(cursor, until="turn")`` stops after that turn ends.
    """

    session_id: str
    cursor: str


class TurnFailed(WorldError):
    """The turn ended with ``turn.failed`` (e.g. the model refused the request for
    good); ``error`` is the message saved in the log."""

    def __init__(self, session_id: str, error: str) -> None:
        self.session_id = session_id
        self.error = error
        super().__init__(f"session {session_id!r}: turn failed: {error}")


class TurnStopped(TurnFailed):
    """The turn was stopped (``session.stop()``) and ended with ``turn.stopped``;
    ``text`` is its answer as saved when it was cut, ``reason`` the stop's."""

    def __init__(self, session_id: str, text: str, reason: str | None = None) -> None:
        self.text = text
        self.reason = reason
        super().__init__(session_id, "stopped" + (f": {reason}" if reason else " by the user"))


class TooManyModelCalls(TurnFailed):
    """The turn made as many model calls as its limit (``Agent(max_model_calls=)``
    or the prompt's) and was ended with ``turn.failed`` (``reason``
    ``"max_model_calls"``); ``limit`` is that limit."""

    def __init__(self, session_id: str, error: str, limit: int | None) -> None:
        self.limit = limit
        super().__init__(session_id, error)


def _failed(session_id: str, data: Any) -> TurnFailed:
    """The error ``await turn`` raises for a ``turn.failed`` with ``data``."""
    error = str(data.get("error", ""))
    if data.get("reason") == "max_model_calls":
        limit = data.get("limit")
        return TooManyModelCalls(session_id, error, limit if isinstance(limit, int) else None)
    return TurnFailed(session_id, error)


class Turn(Generic[OutputT]):
    """What ``Session.prompt`` returns, at once.

    ``await turn.accepted`` gives :class:`Accepted` once the prompt is appended
    (unfenced, with a wake and an idempotency key). ``await turn`` gives the
    turn's final text once some worker (any process running ``agent.work()``)
    has answered it (with ``Agent(output_type=SomeModel)``: the validated
    ``SomeModel``), or raises :class:`TurnFailed` (:class:`TurnStopped` when it
    was stopped; :class:`TooManyModelCalls` when it reached its model-call limit).
    Awaiting is optional: the turn
    runs whether or not anyone waits for it.
    """

    def __init__(
        self, session: PromptedSession, text: str, key: str, *, max_model_calls: int | None = None
    ) -> None:
        self.session = session
        self.text = text
        self.key = key
        self.max_model_calls = max_model_calls
        """The model-call limit saved with the prompt (``None``: the agent's)."""
        """The prompt's idempotency key: prompting again with it never doubles it."""
        self._seq: int | None = None
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "Session.prompt() needs a running event loop: call it from async code "
                "(e.g. inside asyncio.run(...))"
            ) from None
        self.accepted: asyncio.Task[Accepted] = asyncio.ensure_future(self._accept())
        """An awaitable of :class:`Accepted`."""
        _in_flight.add(self.accepted)
        self.accepted.add_done_callback(_in_flight.discard)

    @property
    def session_id(self) -> str:
        return self.session.id

    async def _accept(self) -> Accepted:
        self._seq = await self.session.append_prompt(
            self.text, self.key, max_model_calls=self.max_model_calls
        )
        return Accepted(self.session.id, encode_cursor(self.session.id, self._seq))

    async def result(self) -> OutputT:
        """Wait for the end of the turn answering this prompt; its final text, or
        its answer as the agent's ``output_type``."""
        accepted = await self.accepted
        async with contextlib.aclosing(self.session.stream(accepted.cursor)) as events:
            async for event in events:
                if event.kind in log.TURN_END_KINDS and event.data.get("prompt") == self._seq:
                    if event.kind == log.TURN_FAILED:
                        raise _failed(self.session.id, event.data)
                    if event.kind == log.TURN_STOPPED:
                        reason = event.data.get("reason")
                        text = str(event.data.get("text", ""))
                        raise TurnStopped(
                            self.session.id, text, None if reason is None else str(reason)
                        )
                    return self._answer(event.data)
        raise AssertionError("unreachable: stream() without until never ends")  # pragma: no cover

    def _answer(self, data: Any) -> OutputT:
        output_type = self.session.output_type
        if output_type is not None and isinstance(data.get("output"), dict):
            return cast(OutputT, output_value(output_type, data["output"]))
        return cast(OutputT, str(data.get("text", "")))

    def __await__(self) -> Generator[Any, None, OutputT]:
        return self.result().__await__()

    def __repr__(self) -> str:
        return f"Turn(session_id={self.session.id!r}, key={self.key!r})"
