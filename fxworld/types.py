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
    """An entry as stored in a session's log.

    ``seq`` is its position (dense, from 1). ``epoch`` is the epoch of the fence
    it was appended with, or ``None`` for an unfenced append. ``at`` is the time
    it was committed, timezone-aware UTC.
    """

    session_id: str
    seq: int
    kind: str
    data: JSONObject
    epoch: int | None
    at: datetime


@dataclass(frozen=True)
class Fence:
    """The token of the process running a session's turns (W1, W2).

    ``epoch`` grows with every ``acquire``; ``seq`` is where the ``fence`` entry
    of this takeover landed in the log.
    """

    session_id: str
    epoch: int
    seq: int


@dataclass(frozen=True)
class WakeLease:
    """A due wake handed to one worker until ``expires_at`` (W12).

    ``attempt`` is 1 for the first delivery of a wake request and grows by one
    each time an expired lease makes the world deliver it again. ``token``
    identifies this delivery for ``renew_wake`` and ``finish_wake``.
    """

    session_id: str
    token: str
    attempt: int
    expires_at: datetime


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
