"""Retention: delete whole sessions that have been idle longer than a limit.

:func:`prune` walks the world's sessions (``list_sessions``) and, for each one
whose last entry is older than ``idle_for``, decides from the log's end and the
session's wake:

- kept (and reported why): a turn in progress (running, handed over, or parked on
  an approval: "approval waiting"), a prompt no turn has answered yet, a pending
  wake (due or not) or a held lease (seen with ``wake_state`` when the world is a
  :class:`~fxworld.protocol.WakeLister`); and, in the world an ``EncryptedWorld``
  stores its sessions in, pruned by itself: a session holding data keys (its id
  starts with :data:`~fxworld.validate.KEY_SESSION_PREFIX`; deleting it would
  crypto-shred a session that may be in use) and a session whose entries are
  sealed (:data:`~fxworld.validate.SEALED_FIELD`: its turns cannot be read
  there). Prune those through the EncryptedWorld;
- otherwise deleted, with ``delete_if_idle`` (:class:`~fxworld.protocol.IdleDeleter`):
  the world deletes it only if its log still ends where it was looked at and no
  wake is pending, in one atomic step. A prompt that arrives between the look and
  the delete therefore keeps the session ("changed while pruning"), and a prompt
  that arrives after the delete starts the session anew (W14): no prompt whose
  append returned is ever deleted unseen by the check. A world without
  ``delete_if_idle`` cannot prune safely: :func:`prune` refuses to delete there
  (``ConfigurationError``); ``dry_run`` still reports.

Whole sessions only: a delete removes the log, its keys and its wake at once
(W14). Nothing is remembered between runs, so an interrupted prune is simply run
again. Cost per session: one ``last_entry`` (with a
:class:`~fxworld.protocol.LastEntryReader`; else about 2 log2(n) one-entry
reads); for an idle one, also one read per fence its log ends with, one
``wake_state``, the reads of its latest turn (usually 2 to 4) and one
``delete_if_idle``; plus one ``list_sessions`` per 500.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from fxworld.errors import ConfigurationError, InvalidArgument
from fxworld.logends import last_entry
from fxworld.protocol import (
    IdleDeleter,
    SessionLister,
    WakeLister,
    World,
)
from fxworld.types import Entry
from fxworld.validate import FENCE_KIND, KEY_SESSION_PREFIX, SEALED_FIELD

from . import clock
from .replay import Replay
from .tail import replay_latest_turn

__all__ = ["prune", "PruneReport", "parse_duration"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_PAGE = 500


def parse_duration(text: str) -> timedelta:
    """``"30d"``, ``"12h"``, ``"90s"`` (also ``m`` minutes, ``w`` weeks; a decimal
    number is fine: ``"1.5h"``) as a :class:`timedelta` over zero; anything else
    raises :class:`~fxworld.errors.InvalidArgument` saying what is expected."""
    match = _DURATION.match(text) if isinstance(text, str) else None
    if match is None or float(match[1]) <= 0:
        raise InvalidArgument(
            f"a duration is a number over 0 and a unit (s, m, h, d, w), like 30d, 12h "
            f"or 90s; not {text!r}"
        )
    return timedelta(seconds=float(match[1]) * _UNITS[match[2]])


def _limit(idle_for: timedelta | float | str) -> timedelta:
    if isinstance(idle_for, str):
        return parse_duration(idle_for)
    if isinstance(idle_for, (int, float)) and not isinstance(idle_for, bool):
        idle_for = timedelta(seconds=idle_for)
    if not isinstance(idle_for, timedelta) or idle_for <= timedelta(0):
        raise InvalidArgument(
            f"idle_for must be a timedelta, seconds or a duration like '30d', over 0; "
            f"not {idle_for!r}"
        )
    return idle_for


@dataclass
class PruneReport:
    """What a :func:`prune` did."""

    dry_run: bool
    """Nothing was deleted: :attr:`deleted` lists what would have been."""
    scanned: int = 0
    """Sessions looked at."""
    deleted: list[str] = field(default_factory=list)
    """The ids deleted (with ``dry_run``: that would be), in the listing's order."""
    kept: dict[str, str] = field(default_factory=dict)
    """Sessions idle long enough but kept, each with why."""


async def prune(
    world: World,
    *,
    idle_for: timedelta | float | str,
    dry_run: bool = False,
    progress: Callable[[str, str | None], None] | None = None,
) -> PruneReport:
    """Delete the whole sessions of ``world`` whose last entry is older than
    ``idle_for`` (a :class:`timedelta`, seconds, or a duration such as ``"30d"``),
    unless one is busy (see the module: those are kept and reported).
    ``dry_run``: delete nothing, report what would be. ``progress(sid, reason)``
    is told of each decision as it is made (``reason`` ``None``: deleted).

    The world must list its sessions (:class:`~fxworld.protocol.SessionLister`)
    and, unless ``dry_run``, delete conditionally
    (:class:`~fxworld.protocol.IdleDeleter`), else ``ConfigurationError`` before
    any change. Safe to interrupt and to run again.
    """
    limit = _limit(idle_for)
    if not isinstance(world, SessionLister):
        raise ConfigurationError(f"{world!r} cannot list its sessions: nothing to prune")
    if not dry_run and not isinstance(world, IdleDeleter):
        raise ConfigurationError(
            f"{world!r} has no delete_if_idle: it cannot delete a session without racing "
            "a prompt that arrives meanwhile (dry_run=True only reports)"
        )
    report = PruneReport(dry_run=dry_run)
    cutoff = clock.now() - limit
    after = ""
    while ids := await world.list_sessions(after=after, limit=_PAGE):
        for sid in ids:
            report.scanned += 1
            verdict = await _decide(world, sid, cutoff, dry_run)
            if verdict is _ACTIVE:
                continue
            if verdict is None:
                report.deleted.append(sid)
            else:
                report.kept[sid] = verdict
            if progress is not None:
                progress(sid, verdict)
        after = ids[-1]
    return report


_ACTIVE = "active"
_DATA_KEYS = (
    "holds the data keys of an EncryptedWorld's session: deleting it would shred them "
    "(prune through the EncryptedWorld)"
)
_SEALED = "sealed by an EncryptedWorld: its turns cannot be read here (prune through it)"


async def _decide(world: World, sid: str, cutoff: datetime, dry_run: bool) -> str | None:
    """Why ``sid`` stays (:data:`_ACTIVE`: not idle long enough), or ``None``
    once it is deleted (with ``dry_run``: when it would be)."""
    last = await last_entry(world, sid)
    if last is None or last.at > cutoff:
        return _ACTIVE
    if sid.startswith(KEY_SESSION_PREFIX):
        return _DATA_KEYS
    if await _sealed(world, last):
        return _SEALED
    busy = await _busy(world, sid, last.seq)
    if busy is not None or dry_run:
        return busy
    assert isinstance(world, IdleDeleter)
    if await world.delete_if_idle(sid, last=last.seq):
        return None
    return "changed while pruning (a new entry or a wake)"


async def _sealed(world: World, last: Entry) -> bool:
    """Whether the session's last entry other than a fence (which ``acquire``
    writes in plaintext, W1) is sealed by an ``EncryptedWorld``."""
    entry: Entry | None = last
    while entry is not None and entry.kind == FENCE_KIND and entry.seq > 1:
        before = await world.read(entry.session_id, entry.seq - 2, limit=1)
        entry = before[0] if before else None
    return entry is not None and SEALED_FIELD in entry.data


async def _busy(world: World, sid: str, last: int) -> str | None:
    """Why the session, as its log stands at ``last``, must be kept; else ``None``."""
    if isinstance(world, WakeLister):
        wake = await world.wake_state(sid)
        if wake is not None and wake.leased_until is not None:
            return f"lease held until {wake.leased_until.isoformat()}"
        if wake is not None:
            return f"wake pending (due {wake.due_at.isoformat()})"
    return _turn_state(await replay_latest_turn(world, sid, last=last))


def _turn_state(state: Replay) -> str | None:
    cur = state.current
    if cur is not None:
        now = clock.now()
        if any(c.approval == "requested" and not c.expired(now) for c in cur.calls):
            return "approval waiting"
        return "turn in progress"
    if state.pending_prompt() is not None:
        return "prompt waiting"
    return None
