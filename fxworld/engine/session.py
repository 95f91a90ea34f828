"""A session as the application sees it: prompt it, stream it, from any process."""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator
from typing import Any, Generic, Literal, Protocol

from typing_extensions import TypeVar

from fxworld import validate
from fxworld.errors import Conflict, ContextMismatch, InvalidArgument, KeyReused
from fxworld.follow import bounded_follow
from fxworld.models.base import Message
from fxworld.protocol import World
from fxworld.types import Entry, JSONObject, NewEntry

from . import approvals, log
from .context import context_data, same_context, saved_context
from .cursor import decode_cursor, encode_cursor
from .events import StreamEvent
from .fork import fork_session
from .limits import check_max_model_calls
from .owners import check_prompt
from .replay import conversation
from .subagents import open_children
from .tail import replay_latest_turn
from .telemetry import trace_context
from .turn import Accepted, Turn

__all__ = ["Session", "StreamEvent"]

OutputT = TypeVar("OutputT", default=str)


class WorldOwner(Protocol):
    """What a session needs of its agent: the world, set up, and the types of its
    context and answers (an Agent has it all)."""

    name: str
    context_type: type[Any] | None
    output_type: type[Any] | None

    async def ready(self) -> World: ...


class Session(Generic[OutputT]):
    """A handle on one session. Cheap: it holds no connection and no state.

    Made by ``agent.session(id, context=...)``; a new random id when ``id`` is
    ``None``. ``context``: the session's context, saved with its first prompt and
    never changed after (see :meth:`append_prompt`); checked here, before any I/O
    (:class:`~fxworld.errors.InvalidContext`).
    """

    def __init__(self, agent: WorldOwner, id: str | None = None, *, context: Any = None) -> None:
        self.agent = agent
        self.id: str = validate.session_id(id) if id is not None else f"s-{uuid.uuid4().hex}"
        self.context: JSONObject | None = (
            None if context is None else context_data(context, agent.context_type)
        )
        """The context given to this handle, as saved (``None``: none given)."""

    def __repr__(self) -> str:
        return f"Session(id={self.id!r})"

    def prompt(
        self, text: str, *, key: str | None = None, max_model_calls: int | None = None
    ) -> Turn[OutputT]:
        """Send a prompt; returns a :class:`Turn` at once (needs a running event loop).

        The prompt is appended unfenced with ``wake=0`` and an idempotency key
        (``key``, or a new random one): sending it again with the same key never
        doubles it, and the same key with another text raises
        :class:`~fxworld.errors.KeyReused` when awaited (``turn.accepted``). Prompts
        sent while a turn runs are answered after it, in order.

        ``max_model_calls``: the model calls the turn answering this prompt may make
        (an int >= 1, saved in the prompt: every worker honours it), instead of the
        agent's ``max_model_calls``; ``None``: the agent's.
        """
        if not isinstance(text, str):
            raise InvalidArgument(f"prompt text must be a str, not {type(text).__name__}")
        if max_model_calls is not None:
            check_max_model_calls(max_model_calls, none_ok=False)
        return Turn(
            self,
            text,
            key if key is not None else uuid.uuid4().hex,
            max_model_calls=max_model_calls,
        )

    @property
    def output_type(self) -> type[Any] | None:
        """The agent's ``output_type``: what ``await turn`` validates the answer as."""
        return self.agent.output_type

    async def create(self, text: str, *, key: str | None = None) -> Accepted:
        """Start this session with ``text``: the prompt is appended only as the
        first entry of an empty log (with a wake, like :meth:`prompt`); it returns
        once saved.

        A session that holds entries already raises
        :class:`~fxworld.errors.Conflict`, unless this is the call that created it,
        repeated with the same ``key`` and text (a client's retry): then it returns
        the same :class:`~fxworld.engine.turn.Accepted`. The same key with another
        text raises :class:`~fxworld.errors.KeyReused`.
        """
        seq = await self.append_prompt(text, key if key is not None else uuid.uuid4().hex, new=True)
        return Accepted(self.id, encode_cursor(self.id, seq))

    async def append_prompt(
        self, text: str, key: str, *, new: bool = False, max_model_calls: int | None = None
    ) -> int:
        """The append behind :meth:`prompt` and :meth:`create`: the prompt with its
        idempotency key and a wake (``new``: only as the first entry of an empty
        log, else :class:`~fxworld.errors.Conflict`); its seq.

        A key that was used before returns the seq saved under it (W6); that entry
        must be this same prompt, else :class:`~fxworld.errors.KeyReused`. A
        ``text`` that is not a str raises :class:`~fxworld.errors.InvalidArgument`
        before any I/O.

        With a context (``agent.session(id, context=...)``), the first prompt of a
        new session saves it: it is appended only as the first entry (W5), in the
        same entry, so the session never exists without it. When the session
        exists already, its saved context must be the same, else
        :class:`~fxworld.errors.ContextMismatch` and nothing is written.

        The session belongs to the agent that sent its first prompt: that prompt
        claims it for this handle's agent (:mod:`~fxworld.engine.owners`), and every
        prompt names its agent (``agent``). A session of another agent raises
        :class:`~fxworld.errors.WrongAgent` before anything is written.
        """
        if not isinstance(text, str):
            raise InvalidArgument(f"prompt text must be a str, not {type(text).__name__}")
        w = await self.agent.ready()
        await check_prompt(w, self.id, self.agent.name)
        limit = {} if max_model_calls is None else {"max_model_calls": max_model_calls}
        entry = log.entry(
            log.PROMPT, text=text, key=key, agent=self.agent.name, **trace_context(), **limit
        )
        expect = 0 if new else None
        if self.context is not None:
            seq = await self._append_first(w, entry, key, new)
        else:
            seq = await w.append(self.id, [entry], key=f"prompt:{key}", wake=0.0, expect=expect)
        saved = await w.read(self.id, seq - 1, limit=1)
        if not saved or saved[0].kind != log.PROMPT or saved[0].data.get("text") != text:
            raise KeyReused(self.id, key, seq)
        if new and seq != 1:  # the key was used in this session, not by its creation
            raise Conflict(self.id, 0, seq)
        return seq

    async def _append_first(self, w: World, entry: NewEntry, key: str, new: bool) -> int:
        """Append the prompt ``entry`` with this handle's context: as the session's
        first entry, holding the context; or, when the session exists, after
        checking that its context is this one."""
        assert self.context is not None
        first = log.entry(entry.kind, **entry.data, context=self.context)
        try:  # a key used before returns its seq first (W6), whatever expect says
            return await w.append(self.id, [first], key=f"prompt:{key}", wake=0.0, expect=0)
        except Conflict:
            if new:
                raise
        if not same_context(await saved_context(w, self.id), self.context):
            raise ContextMismatch(self.id)
        return await w.append(self.id, [entry], key=f"prompt:{key}", wake=0.0)

    def _event(self, e: Entry) -> StreamEvent:
        return StreamEvent(encode_cursor(self.id, e.seq), e.kind, e.data)

    async def read(self, cursor: str | None = None, *, limit: int = 1000) -> list[StreamEvent]:
        """The events after ``cursor`` that are in the log now, at most ``limit``;
        does not wait for more."""
        after = decode_cursor(self.id, cursor)
        w = await self.agent.ready()
        return [self._event(e) for e in await w.read(self.id, after, limit=limit)]

    async def stream(
        self, cursor: str | None = None, *, until: Literal["turn"] | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        """Every event after ``cursor`` (``None``: from the start), in order, then new
        ones as they are saved. Works from any process; a consumer that reconnects
        with the last cursor it saw continues with no gap and no duplicate.

        ``until=None`` follows forever (until the consumer stops iterating).
        ``until="turn"`` stops after the event that ends a turn (``turn.finished``
        or ``turn.failed``): when ``cursor`` is a prompt's cursor
        (:attr:`Accepted.cursor`), the turn that answers that prompt; otherwise the
        first turn to end after the cursor (a consumer that reconnects in the
        middle of a turn gets the rest of that turn).

        Raises :class:`~fxworld.errors.InvalidCursor` for a malformed cursor.
        """
        if until not in (None, "turn"):
            raise InvalidArgument(f"until must be None or 'turn', not {until!r}")
        after = decode_cursor(self.id, cursor)
        w = await self.agent.ready()
        target: int | None = None
        if until == "turn" and after > 0:
            at = await w.read(self.id, after - 1, limit=1)
            if at and at[0].seq == after and at[0].kind == log.PROMPT:
                target = after
        follower = bounded_follow(w, self.id, after)  # a stalled consumer pins one page
        try:
            async for e in follower:
                yield self._event(e)
                if until == "turn" and e.kind in log.TURN_END_KINDS:
                    if target is None or e.data.get("prompt") == target:
                        return
        finally:
            aclose = getattr(follower, "aclose", None)
            if aclose is not None:
                await aclose()

    async def messages(self) -> list[Message]:
        """The conversation so far, as the model hears it."""
        w = await self.agent.ready()
        entries: list[Entry] = []
        after = 0
        while True:
            batch = await w.read(self.id, after)
            if not batch:
                break
            entries.extend(batch)
            after = batch[-1].seq
        return conversation(entries)

    # -- approvals and stop (see fxworld.engine.approvals) -------------------------------

    async def approve(
        self, execution_id: str, note: str | None = None, *, actor: str | None = None
    ) -> None:
        """Approve the waiting call ``execution_id``; returns once saved, and the
        call then runs. ``note`` and ``actor`` (who approves: a str of 1..200
        characters; ``None``: ``"local"``) are saved with the decision. The first
        decision wins: approving again does nothing;
        approving a denied call raises :class:`~fxworld.errors.AlreadyDecided`;
        past the call's ``approval_timeout``, :class:`~fxworld.errors.ApprovalExpired`
        (the timeout denied it: its denial is saved, if no worker saved it yet); a
        call that does not wait in the session's latest turn raises
        :class:`~fxworld.errors.UnknownCall`; a bad ``actor`` or ``note``,
        :class:`~fxworld.errors.InvalidArgument` (nothing is written)."""
        w = await self.agent.ready()
        await approvals.decide(w, self.id, execution_id, True, note, actor=actor)

    async def deny(
        self, execution_id: str, reason: str | None = None, *, actor: str | None = None
    ) -> None:
        """Deny the waiting call ``execution_id``: the model hears the denial (with
        ``reason``, saved as the decision's ``reason`` and ``note``) as the call's
        result. Same rules as :meth:`approve`."""
        w = await self.agent.ready()
        await approvals.decide(w, self.id, execution_id, False, reason, actor=actor)

    async def pending_approvals(self) -> list[approvals.Approval]:
        """The calls of the running turn that wait for a decision (not those past
        their ``expires_at``). Reads only the latest turn, however long the log."""
        return await approvals.pending_approvals(await self.agent.ready(), self.id)

    async def stop(self, reason: str | None = None, *, actor: str | None = None) -> None:
        """Stop the running turn; returns once ``stop.requested`` is saved, with
        ``reason`` and ``actor`` (who stops it, as for :meth:`approve`). The
        turn ends with ``turn.stopped`` (``await turn`` raises
        :class:`~fxworld.engine.turn.TurnStopped`). Does nothing when no turn runs."""
        w = await self.agent.ready()
        await approvals.request_stop(w, self.id, reason, actor=actor)

    async def fork(self, *, at: str | None = None, id: str | None = None) -> Session[OutputT]:
        """A new session whose log holds this one's conversation up to ``at``, a
        cursor at a turn boundary (``None``: the end of the last finished turn);
        its first entry is ``forked``, naming this session and the position. This
        session is not changed. The fork can be prompted at once: its next turn's
        model hears the conversation as of the fork. ``id``: the fork's id (a new
        random one when ``None``); a retry with the same ``id`` returns the same
        fork. The fork keeps this session's context (and a fork of a child session
        of an agent tool is run with the child's agent, and answers no parent).

        Raises :class:`~fxworld.errors.UnknownSession` when this session has no
        log, :class:`~fxworld.errors.InvalidArgument` for a cursor inside a turn
        (naming the nearest boundaries) or past the log's end, and
        :class:`~fxworld.errors.Conflict` when session ``id`` exists already.
        Nothing is written unless the whole fork is (see
        :mod:`fxworld.engine.fork`)."""
        w = await self.agent.ready()
        made = await fork_session(w, self.id, at=at, target=id, agent=self.agent.name)
        await check_prompt(w, made, self.agent.name)  # the fork is this agent's
        return Session[OutputT](self.agent, made)

    async def saved_context(self) -> JSONObject | None:
        """The context the session was created with, as saved (``None``: it has none,
        or the session has no log)."""
        return await saved_context(await self.agent.ready(), self.id)

    async def delete(self) -> None:
        """Remove the session's log and pending wake (W14). A turn running in it
        stops writing (the session is taken first), and the child sessions of its
        agent tools' calls are stopped (:func:`delete_session`)."""
        await delete_session(await self.agent.ready(), self.id)


async def delete_session(world: World, sid: str) -> None:
    """Delete session ``sid`` (W14) and stop the child sessions its running turn
    waits for. The session is taken first (a new fence: a replaced worker lands no
    call after it), then read, deleted, and its children stopped: a child made
    after that finds its parent gone and does not run."""
    await world.acquire(sid)
    state = await replay_latest_turn(world, sid)
    children = open_children(state.current, None)
    await world.delete(sid)
    for child in children:
        await approvals.request_stop(
            world, child, f"its parent session {sid} was deleted", actor=f"session:{sid}"
        )
