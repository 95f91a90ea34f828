"""Copy sessions from one world to another, and verify a copy.

:func:`copy_session` streams one session's log from the source into the target
(:class:`~fxworld.moving.replicate.Replicator`), then gives the target the wake the
session owes. A rerun resumes where the target stands. :func:`copy_sessions` copies
several all or nothing: it compares every session with the target before it writes
any, so one that diverged stops the copy with nothing written. :func:`verify` compares
entry counts and a hash per session (:class:`~fxworld.moving.digest.Digest`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from fxworld import validate
from fxworld.errors import InvalidArgument, SessionDiverged
from fxworld.protocol import SessionLister, WakeLister, World

from .derived import OpenTurns, engine_key
from .digest import Digest
from .replicate import Replicator, read_pages

__all__ = [
    "Progress",
    "SILENT",
    "CopiedSession",
    "session_ids",
    "pending_wake",
    "give_wake",
    "copy_session",
    "copy_sessions",
    "all_diverged",
    "digest_of",
    "verify",
]


class Progress(Protocol):
    """Told of the work as it goes (the CLI's progress bar)."""

    def entries(self, n: int) -> None:
        """``n`` more entries were read and copied (or found already there)."""

    def session_done(self) -> None:
        """One more session is done."""


class _Silent:
    def entries(self, n: int) -> None:
        pass

    def session_done(self) -> None:
        pass


SILENT: Progress = _Silent()
"""A :class:`Progress` that shows nothing."""


@dataclass(frozen=True)
class CopiedSession:
    """What copying one session did."""

    session_id: str
    entries: int
    """Entries in the source's log (all of them are now in the target's)."""
    written: int
    """Entries this run wrote to the target (0 when it was up to date)."""
    wake: datetime | None
    """When the wake given to the target is due, or ``None`` if none was owed."""


async def session_ids(world: World, given: Sequence[str] | None, url: str) -> list[str]:
    """``given`` (checked), else every session of ``world`` (``list_sessions``)."""
    if given:
        return [validate.session_id(s) for s in given]
    if not isinstance(world, SessionLister):
        raise InvalidArgument(
            f"the world at {url} cannot list its sessions: name them with --session ID"
        )
    ids: list[str] = []
    while page := await world.list_sessions(after=ids[-1] if ids else "", limit=500):
        ids.extend(page)
        if len(page) < 500:
            break
    return ids


async def pending_wake(world: World, sid: str, turns: OpenTurns) -> datetime | None:
    """When the session's pending wake is due in ``world``: as the world says where it
    can (:class:`~fxworld.protocol.WakeLister`), else now if the log owes one."""
    if isinstance(world, WakeLister):
        state = await world.wake_state(sid)
        return None if state is None else state.due_at
    return datetime.now(UTC) if turns.owes_wake else None


async def give_wake(target: World, sid: str, due: datetime | None) -> None:
    """Enqueue the wake due at ``due`` on the target (W11 keeps an earlier one)."""
    if due is not None:
        delay = max(0.0, (due - datetime.now(UTC)).total_seconds())
        await target.wake(sid, delay=min(delay, validate.MAX_SECONDS))


@dataclass
class _Checked:
    """A session compared and not yet written: how far the target holds it."""

    replicator: Replicator
    turns: OpenTurns


async def _check(source: World, target: World, sid: str) -> _Checked:
    """Compare the target's log of ``sid`` with the start of the source's, writing
    nothing; :class:`~fxworld.errors.SessionDiverged` if it is not that start."""
    checked = _Checked(Replicator(target, sid), OpenTurns())
    async for page in read_pages(source, sid):
        for entry in page:
            if not await checked.replicator.holds(entry, engine_key(entry)):
                return checked  # the target ends here: the rest is to be written
            checked.turns.see(entry)
    await checked.replicator.finish()  # the source ended: the target holds no more
    return checked


async def _write(source: World, checked: _Checked, progress: Progress) -> CopiedSession:
    """Write what the target lacks of a checked session, then give it its wake."""
    replicator, turns = checked.replicator, checked.turns
    progress.entries(replicator.fed)  # found already there
    async for page in read_pages(source, replicator.sid, after=replicator.fed):
        for entry in page:
            await replicator.feed(entry, engine_key(entry))
            turns.see(entry)
        progress.entries(len(page))
    written = await replicator.finish()
    due = await pending_wake(source, replicator.sid, turns)
    await give_wake(replicator.target, replicator.sid, due)
    progress.session_done()
    return CopiedSession(replicator.sid, replicator.fed, written, due)


async def copy_session(
    source: World, target: World, sid: str, progress: Progress = SILENT
) -> CopiedSession:
    """Bring session ``sid`` of ``target`` up to its log in ``source``, and give it
    the wake it owes. Safe to rerun; see :mod:`fxworld.moving.replicate`. A target
    log that is not the start of the source's raises
    :class:`~fxworld.errors.SessionDiverged` before anything is written."""
    return await _write(source, await _check(source, target, sid), progress)


async def copy_sessions(
    source: World, target: World, ids: Sequence[str], progress: Progress = SILENT
) -> list[CopiedSession]:
    """:func:`copy_session` for each of ``ids``, all or nothing: every session is
    compared with the target first, and if any diverged, nothing is written and
    :class:`~fxworld.errors.SessionDiverged` names it (and counts the others)."""
    checked: list[_Checked] = []
    diverged: list[SessionDiverged] = []
    for sid in ids:
        try:
            checked.append(await _check(source, target, sid))
        except SessionDiverged as e:
            diverged.append(e)
    if diverged:
        raise all_diverged(diverged)
    return [await _write(source, c, progress) for c in checked]


def all_diverged(found: Sequence[SessionDiverged]) -> SessionDiverged:
    """One error for the sessions ``found`` diverged: the first, and the others
    counted (five of them named)."""
    first = found[0]
    if len(found) == 1:
        return first
    names = ", ".join(repr(e.session_id) for e in found[1:6]) + (", ..." if len(found) > 6 else "")
    why = str(first).split(": ", 1)[1]
    return SessionDiverged(
        first.session_id, first.seq, f"{why}; {len(found) - 1} more sessions diverged ({names})"
    )


async def digest_of(world: World, sid: str) -> Digest:
    """The count and hash of session ``sid``'s log in ``world``."""
    digest = Digest()
    async for page in read_pages(world, sid):
        for entry in page:
            digest.add(entry)
    return digest


async def verify(source: World, target: World, ids: Sequence[str]) -> list[str]:
    """One line per session whose logs differ (count or hash); empty if all agree."""
    differ = []
    for sid in ids:
        ours, theirs = await digest_of(source, sid), await digest_of(target, sid)
        if ours.count != theirs.count:
            differ.append(f"{sid}: {ours.count} entries in the source, {theirs.count} in the copy")
        elif ours.hexdigest != theirs.hexdigest:
            differ.append(f"{sid}: same {ours.count} entries, but their hashes differ")
    return differ
