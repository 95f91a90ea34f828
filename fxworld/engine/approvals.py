"""Approvals and stop as the application sees them: decide a waiting call, list
the waiting calls, stop a running turn; from any process, with no worker running.

Functions of a world and a session id (``Session`` and the CLI call them). Each
is an unfenced append with an idempotency key and a wake (W6, W7):

- a decision is ``approval.decided`` keyed ``approval:<execution_id>``. Every
  decision of a call (``approve``, ``deny``, a worker's timeout) uses that one key,
  so exactly one lands, whichever process sends it; the others get back the seq of
  the one that landed and compare it with their own (the same: nothing to do; the
  other way: :class:`~fxworld.errors.AlreadyDecided`).
- a stop is ``stop.requested`` keyed ``stop:<prompt>`` for the turn answering that
  prompt, so stopping twice writes once and a late stop never ends a later turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fxworld import validate
from fxworld.errors import AlreadyDecided, InvalidArgument, UnknownCall
from fxworld.protocol import World
from fxworld.types import Entry

from . import log
from .replay import Replay

__all__ = ["Approval", "decide", "pending_approvals", "request_stop", "decision_key"]


@dataclass(frozen=True)
class Approval:
    """A tool call that waits for a person: ``session.approve(execution_id)`` or
    ``session.deny(execution_id)``. ``expires_at`` is when it counts as denied
    (``None``: it waits forever); times are timezone-aware UTC."""

    execution_id: str
    call_id: str
    name: str
    input: dict[str, Any]
    requested_at: datetime
    expires_at: datetime | None


def decision_key(execution_id: str) -> str:
    """The idempotency key every decision on this call is appended with."""
    return f"approval:{execution_id}"


async def _entries(world: World, sid: str) -> list[Entry]:
    validate.session_id(sid)
    entries: list[Entry] = []
    while True:
        batch = await world.read(sid, entries[-1].seq if entries else 0)
        if not batch:
            return entries
        entries.extend(batch)


async def pending_approvals(world: World, sid: str) -> list[Approval]:
    """The calls of session ``sid``'s running turn that wait for a decision."""
    state = Replay().apply_all(await _entries(world, sid))
    cur = state.current
    if cur is None or cur.stop:
        return []
    return [
        Approval(c.execution_id, c.id, c.name, dict(c.input), c.requested_at, c.expires_at)
        for c in cur.calls
        if c.approval == "requested" and c.requested_at is not None and not c.resolved
    ]


async def decide(
    world: World, sid: str, execution_id: str, approved: bool, text: str | None
) -> None:
    """Append the decision on ``execution_id`` unless one stands; see the module."""
    if not isinstance(execution_id, str) or not execution_id:
        raise InvalidArgument(f"execution_id must be a non-empty str, not {execution_id!r}")
    if text is not None and not isinstance(text, str):
        raise InvalidArgument(f"a note or reason must be a str, not {type(text).__name__}")
    entries = await _entries(world, sid)
    for e in entries:
        if e.kind == log.APPROVAL_DECIDED and e.data.get("execution_id") == execution_id:
            _check_same(sid, execution_id, approved, e)
            return
    state = Replay().apply_all(entries)
    cur = state.current
    waiting = (
        cur is not None
        and not cur.stop
        and any(c.execution_id == execution_id and c.approval == "requested" for c in cur.calls)
    )
    if not waiting:
        raise UnknownCall(sid, execution_id)
    field = "note" if approved else "reason"
    seq = await world.append(
        sid,
        [
            log.entry(
                log.APPROVAL_DECIDED, execution_id=execution_id, approved=approved, **{field: text}
            )
        ],
        key=decision_key(execution_id),
        wake=0.0,
    )
    landed = await world.read(sid, seq - 1, limit=1)
    _check_same(sid, execution_id, approved, landed[0])


def _check_same(sid: str, execution_id: str, approved: bool, decided: Entry) -> None:
    if decided.data.get("approved") is not approved:
        raise AlreadyDecided(sid, execution_id, decided.data.get("approved") is True)


async def request_stop(world: World, sid: str, reason: str | None) -> bool:
    """Append ``stop.requested`` for the running turn (or the next prompt's, not
    started yet); nothing when no turn runs or waits (then ``False``)."""
    if reason is not None and not isinstance(reason, str):
        raise InvalidArgument(f"reason must be a str, not {type(reason).__name__}")
    state = Replay().apply_all(await _entries(world, sid))
    target = state.current.prompt if state.current is not None else state.pending_prompt()
    if target is None:
        return False
    await world.append(
        sid,
        [log.entry(log.STOP_REQUESTED, prompt=target, reason=reason)],
        key=f"stop:{target}",
        wake=0.0,
    )
    return True
