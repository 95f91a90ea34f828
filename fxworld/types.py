"""The value types of the World protocol: frozen dataclasses, no behaviour.

This module imports nothing else of fxworld.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeAlias

__all__ = ["JSON", "JSONObject", "NewEntry", "Entry", "Fence", "WakeLease", "WakeState"]

JSON: TypeAlias = Any
"""Any value that ``json.dumps`` encodes and ``json.loads`` gives back unchanged."""

JSONObject: TypeAlias = dict[str, Any]
"""A JSON object: a dict with string keys and JSON values."""


@dataclass(frozen=True)
class NewEntry:
    """An entry to append: what happened (``kind``) and its details (``data``).

    ``kind`` is 1..64 characters; kinds starting with ``fence`` are reserved for
    the world's own takeover entries. ``data`` must be a JSON object. Both are
    checked by ``append`` (W15), not here, so a bad entry fails the call that
    carries it with a typed error.
    """

    kind: str
    data: JSONObject = field(default_factory=dict)


@dataclass(frozen=True)
class Entry:
    """An entry as stored in a session's log."""

    session_id: str
    """The session whose log holds it."""
    seq: int
    """Its position in the log: dense, from 1 (W4)."""
    kind: str
    """What it records, 1..64 characters (W15), as appended."""
    data: JSONObject
    """Its data, a JSON object, as appended (W15)."""
    epoch: int | None
    """The epoch of the fence it was appended with, or ``None`` for an unfenced
    append (W2)."""
    at: datetime
    """When it was committed, timezone-aware UTC."""


@dataclass(frozen=True)
class Fence:
    """The token of the process running a session's turns (W1, W2)."""

    session_id: str
    """The session it fences."""
    epoch: int
    """Greater than every epoch ``acquire`` returned before for this session (W1):
    every fence with a lower one is stale from the moment this one exists (W2)."""
    seq: int
    """Where the ``fence`` entry of this takeover landed in the log."""


@dataclass(frozen=True)
class WakeLease:
    """A due wake handed to one worker until ``expires_at`` (W12)."""

    session_id: str
    """The session whose wake this is."""
    token: str
    """Identifies this delivery for ``renew_wake`` and ``finish_wake``: a later
    delivery of the same wake has another."""
    attempt: int
    """1 for the first delivery of a wake request, one more each time an expired
    lease makes the world deliver it again."""
    expires_at: datetime
    """When the lease ends, on the world's clock, unless ``renew_wake`` moves it:
    after it, the wake may be delivered to another worker (W12)."""
    agent: str | None = None
    """The name of the agent that owns the session, when the world knows it (an
    :class:`~fxworld.protocol.AgentRouter` that recorded one); ``None`` otherwise."""


@dataclass(frozen=True)
class WakeState:
    """What a world can say of one session's pending wake (:class:`~fxworld.protocol.WakeLister`).

    A read-only view, for operators (the inspector) and for retention (``prune`` keeps
    a session whose wake is due or leased). It takes nothing and changes nothing.
    """

    session_id: str
    """The session the wake is for."""
    due_at: datetime
    """When the wake is (or was) due, on the world's clock (W11)."""
    leased_until: datetime | None
    """When the current holder's lease ends, or ``None`` if nobody holds it now (W12).
    A lease whose time has passed is reported as ``None``: it no longer holds."""
    attempt: int
    """Deliveries so far: 0 while never taken, then as :attr:`WakeLease.attempt`."""
