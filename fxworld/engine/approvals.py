"""Approvals and stop as the application sees them: decide a waiting call, list
the waiting calls, stop a running turn; from any process, with no worker running.

Functions of a world and a session id (``Session`` and the CLI call them). Each
reads only the session's latest turn (:mod:`fxworld.engine.tail`), however long
the log. Each write is an unfenced append with an idempotency key and a wake
(W6, W7):

- a decision is ``approval.decided`` keyed ``approval:<execution_id>``. Every
  decision of a call (``approve``, ``deny``, its timeout) uses that one key, so
  exactly one lands, whichever process sends it; the others get back the seq of
  the one that landed and compare it with their own (the same: nothing to do; the
  other way: :class:`~fxworld.errors.AlreadyDecided`).
- past the call's ``expires_at`` it is no longer pending: a decision is refused
  with :class:`~fxworld.errors.ApprovalExpired`, and the process that refuses it
  appends the timeout's denial itself (:func:`expired_decision`, the entry a
  worker writes), unless one landed already; the model hears that denial,
  whoever wrote it.
- a stop is ``stop.requested`` keyed ``stop:<prompt>`` for the turn answering that
  prompt, so stopping twice writes once and a late stop never ends a later turn.

Each decision and stop records its ``actor``, who asked for it (:func:`check_actor`:
``"local"`` when the caller names no one), and a decision its ``note``: the
note of an approval, the reason of a denial (which is also its ``reason``, the
field readers before ``note`` know). The timeout's denial has no actor: no one
decided it.

A parent's business includes its children's approvals: while an agent tool's call
waits for its child session (:mod:`~fxworld.engine.subagents`), the approvals the
child (or its own children) waits for are listed with the parent's, each naming the
session it belongs to (:attr:`Approval.session_id`), and a decision given to the
parent on such a call is saved in that child, where its worker waits for it (as
the Agents SDK surfaces nested approvals on the outer run).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fxworld.errors import AlreadyDecided, ApprovalExpired, InvalidArgument, UnknownCall
from fxworld.protocol import World
from fxworld.types import Entry, NewEntry

from . import clock, log
from .cursor import encode_cursor
from .replay import CallState, Replay, expiry_reason
from .tail import replay_latest_turn
from .telemetry import approvals_waiting

__all__ = [
    "Approval",
    "decide",
    "pending_approvals",
    "request_stop",
    "decision_key",
    "stop_key",
    "expired_decision",
    "requested_entry",
    "check_actor",
    "LOCAL_ACTOR",
    "MAX_ACTOR_CHARS",
]

LOCAL_ACTOR = "local"
"""The actor of a decision or stop whose caller names no one (a Python call without
``actor``, the inspector or the session routes without an ``authorize`` hook)."""
MAX_ACTOR_CHARS = 200
"""The longest actor, in characters."""


def check_actor(actor: object) -> str:
    """``actor`` as it is recorded (``None``: :data:`LOCAL_ACTOR`); anything but a str
    of 1..:data:`MAX_ACTOR_CHARS` printable characters, not all blank, raises
    :class:`~fxworld.errors.InvalidArgument`."""
    if actor is None:
        return LOCAL_ACTOR
    if not isinstance(actor, str):
        raise InvalidArgument(f"actor must be a str, not {type(actor).__name__}")
    if not (1 <= len(actor) <= MAX_ACTOR_CHARS) or not actor.strip() or not actor.isprintable():
        shown = repr(actor) if len(actor) <= 40 else repr(actor[:37]) + "..."
        raise InvalidArgument(
            f"actor {shown} is not 1..{MAX_ACTOR_CHARS} printable characters (not all blank)"
        )
    return actor


@dataclass(frozen=True)
class Approval:
    """A tool call that waits for a person: ``session.approve(execution_id)`` or
    ``session.deny(execution_id)``. ``expires_at`` is when it counts as denied
    (``None``: it waits forever), ``timeout`` the ``approval_timeout`` it was
    asked with; times are timezone-aware UTC. ``cursor`` is the position of its
    ``approval.requested`` event in the session's stream."""

    execution_id: str
    call_id: str
    name: str
    input: dict[str, Any]
    requested_at: datetime
    expires_at: datetime | None
    timeout: float | None = None
    cursor: str = ""
    session_id: str = ""

    def event_data(self) -> dict[str, Any]:
        """The data of its ``approval.requested`` event, as the stream shows it."""
        entry = requested_entry(
            self.execution_id, self.call_id, self.name, self.input, self.timeout, self.expires_at
        )
        return dict(entry.data)


def requested_entry(
    execution_id: str,
    call_id: str,
    name: str,
    input: dict[str, Any],
    timeout: float | None,
    expires_at: datetime | None,
) -> NewEntry:
    """The ``approval.requested`` entry that parks a call (a worker appends it)."""
    return log.entry(
        log.APPROVAL_REQUESTED,
        execution_id=execution_id,
        call_id=call_id,
        name=name,
        input=input,
        timeout=timeout,
        expires_at=None if expires_at is None else expires_at.isoformat(),
    )


def decision_key(execution_id: str) -> str:
    """The idempotency key every decision on this call is appended with."""
    return f"approval:{execution_id}"


def stop_key(prompt: int) -> str:
    """The idempotency key a stop of the turn answering ``prompt`` is appended with."""
    return f"stop:{prompt}"


def expired_decision(execution_id: str, reason: str) -> NewEntry:
    """The denial a call's ``approval_timeout`` decides, whichever process writes
    it (a worker, or a decision that came too late): ``expired`` marks it."""
    return log.entry(
        log.APPROVAL_DECIDED, execution_id=execution_id, approved=False, reason=reason, expired=True
    )


def _waiting(state: Replay) -> list[CallState]:
    """The calls of the running turn that wait for a decision (expired or not)."""
    cur = state.current
    if cur is None or cur.stop:
        return []
    return [c for c in cur.calls if c.approval == "requested" and not c.resolved]


def _children(state: Replay) -> list[str]:
    """The child sessions the running turn's calls wait for (``child.started``)."""
    cur = state.current
    if cur is None or cur.stop:
        return []
    return [c.child for c in cur.calls if c.child is not None and not c.resolved]


async def pending_approvals(world: World, sid: str) -> list[Approval]:
    """The calls of session ``sid``'s running turn that wait for a decision now
    (a call past its ``expires_at`` does not: its timeout decides it), then those
    its child sessions wait for, depth first."""
    state = await replay_latest_turn(world, sid)
    now = clock.now()
    found = [
        Approval(
            c.execution_id,
            c.id,
            c.name,
            dict(c.input),
            c.requested_at,
            c.expires_at,
            c.timeout,
            encode_cursor(sid, c.requested_seq),
            sid,
        )
        for c in _waiting(state)
        if c.requested_at is not None and not c.expired(now)
    ]
    for child in _children(state):
        found.extend(await pending_approvals(world, child))
    return found


async def decide(
    world: World,
    sid: str,
    execution_id: str,
    approved: bool,
    text: str | None,
    *,
    actor: str | None = None,
) -> None:
    """Append the decision on ``execution_id`` unless one stands; see the module.
    ``text``: the approval's note or the denial's reason; ``actor``: who decides
    (:func:`check_actor`)."""
    if not isinstance(execution_id, str) or not execution_id:
        raise InvalidArgument(f"execution_id must be a non-empty str, not {execution_id!r}")
    if text is not None and not isinstance(text, str):
        raise InvalidArgument(f"a note or reason must be a str, not {type(text).__name__}")
    who = check_actor(actor)
    stands: list[Entry] = []

    def watch(e: Entry) -> None:
        if e.kind == log.APPROVAL_DECIDED and e.data.get("execution_id") == execution_id:
            stands.append(e)

    state = await replay_latest_turn(world, sid, watch=watch)
    if stands:
        _check_same(sid, execution_id, approved, stands[0])
        return
    call = next((c for c in _waiting(state) if c.execution_id == execution_id), None)
    if call is None:
        for child in _children(state):  # a child's approval, decided from its parent
            try:
                return await decide(world, child, execution_id, approved, text, actor=actor)
            except UnknownCall:
                continue
        raise UnknownCall(sid, execution_id)
    if call.expired(clock.now()):
        decision = expired_decision(execution_id, expiry_reason(call.timeout))
    else:
        said = {"note": text} if approved else {"reason": text, "note": text}
        decision = log.entry(
            log.APPROVAL_DECIDED, execution_id=execution_id, approved=approved, actor=who, **said
        )
    seq = await world.append(sid, [decision], key=decision_key(execution_id), wake=0.0)
    approvals_waiting(-1)  # (a worker's timeout racing it may count once more)
    landed = await world.read(sid, seq - 1, limit=1)
    _check_same(sid, execution_id, approved, landed[0])


def _check_same(sid: str, execution_id: str, approved: bool, decided: Entry) -> None:
    """Refuse unless the decision that stands is the one asked for now."""
    if decided.data.get("expired") is True:
        raise ApprovalExpired(sid, execution_id)
    if decided.data.get("approved") is not approved:
        raise AlreadyDecided(sid, execution_id, decided.data.get("approved") is True)


async def request_stop(
    world: World, sid: str, reason: str | None, *, actor: str | None = None
) -> bool:
    """Append ``stop.requested`` for the running turn (or the next prompt's, not
    started yet); nothing when no turn runs or waits (then ``False``). ``actor``:
    who stops it (:func:`check_actor`)."""
    if reason is not None and not isinstance(reason, str):
        raise InvalidArgument(f"reason must be a str, not {type(reason).__name__}")
    who = check_actor(actor)
    state = await replay_latest_turn(world, sid)
    target = state.current.prompt if state.current is not None else state.pending_prompt()
    if target is None:
        return False
    await world.append(
        sid,
        [log.entry(log.STOP_REQUESTED, prompt=target, reason=reason, actor=who)],
        key=stop_key(target),
        wake=0.0,
    )
    return True
