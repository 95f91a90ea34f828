"""Copy sessions from one world to another, and verify a copy.

:func:`copy_session` streams one session's log from the source into the target
(:class:`~fxworld.moving.replicate.Replicator`), then gives the target the wake the
session owes. A rerun resumes where the target stands. :func:`verify` compares
entry counts and a hash per session (:class:`~fxworld.moving.digest.Digest`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from fxworld import validate
from fxworld.errors import InvalidArgument
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


async def copy_session(
    source: World, target: World, sid: str, progress: Progress = SILENT
) -> CopiedSession:
    """Bring session ``sid`` of ``target`` up to its log in ``source``, and give it
    the wake it owes. Safe to rerun; see :mod:`fxworld.moving.replicate`."""
    replicator = Replicator(target, sid)
    turns = OpenTurns()
    async for page in read_pages(source, sid):
        for entry in page:
            await replicator.feed(entry, engine_key(entry))
            turns.see(entry)
        progress.entries(len(page))
    written = await replicator.finish()
    due = await pending_wake(source, sid, turns)
    await give_wake(target, sid, due)
    progress.session_done()
    return CopiedSession(sid, replicator.fed, written, due)


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
