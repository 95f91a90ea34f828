"""Import an export file (:mod:`~fxworld.moving.files`) into a world, all or nothing.

An import creates sessions; it never adds to a session the target already had.
Before it writes anything it checks the whole file against the target's own
``max_entry_bytes`` (:func:`~fxworld.moving.files.check_file`) and looks each of the
file's sessions up in the target: if the target has any of them, it refuses the
file (:class:`~fxworld.errors.InvalidArgument`, naming them) and writes nothing. So
a file that repeats a live session's log and adds to it cannot take that session
over from its worker. (``fxworld copy`` is what brings a session up to date from
its source world.)

**Resuming.** Before its first session, an import writes a marker: the session
``fximport.<the file's SHA-256>``, one ``import.started`` entry. It gives the
sessions their wakes only once all of them are written (so no worker runs an
imported session before the import is done), then deletes the marker. An import
stopped half-way (a killed process, a lost connection) leaves the marker, some
sessions whole and at most one in part, and no wake. Rerun with ``resume=True``
(``--resume``) on the same file, it finishes: the marker of this file must be in
the target (else ``InvalidArgument``: nothing to resume), and each of the file's
sessions that the target has must be the start of the file's, compared entry by
entry (else :class:`~fxworld.errors.SessionDiverged`, for every such session, before
anything is written). Before its first wake an import adds ``import.waking`` to the
marker: once it is there, a worker may have answered a session that got its wake,
so a session the target holds whole and followed by more is accepted as imported
(it gets no wake again); the others get their wakes, and the marker is deleted.
The writing is the copy's (:class:`~fxworld.moving.replicate.Replicator`), so
nothing lands twice. The marker
names the file by its bytes: a new export of the same world is another file, and
resumes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from itertools import groupby
from pathlib import Path

from fxworld.errors import InvalidArgument, SessionDiverged
from fxworld.protocol import World
from fxworld.types import NewEntry

from .files import FileSummary, check_file, entry_limit, read_records
from .records import EndRecord, EntryRecord, WakeRecord
from .replicate import Replicator
from .transfer import SILENT, CopiedSession, Progress, all_diverged, give_wake

__all__ = ["import_file", "marker_id", "MARKER_PREFIX", "MARKER_KIND", "WAKING_KIND"]

MARKER_PREFIX = "fximport."
"""The marker of an import under way is the session ``fximport.<SHA-256 of the file>``."""
MARKER_KIND = "import.started"
"""The kind of the marker's first entry."""
WAKING_KIND = "import.waking"
"""The kind of the marker's entry appended before the import's first wake."""


def marker_id(summary: FileSummary) -> str:
    """The id of the marker session of an import of the file ``summary`` describes."""
    return f"{MARKER_PREFIX}{summary.sha256}"


async def import_file(
    target: World,
    path: Path,
    progress: Progress = SILENT,
    *,
    resume: bool = False,
    checked: FileSummary | None = None,
) -> list[CopiedSession]:
    """Import the export at ``path`` into ``target`` (see the module's docstring):
    check it whole (:func:`~fxworld.moving.files.check_file` against the target's
    ``max_entry_bytes``, unless ``checked`` is what that returned), refuse it if the
    target has any of its sessions (unless ``resume`` finishes an interrupted import
    of this same file), then write them all, and give their wakes."""
    summary = checked or check_file(path, max_entry_bytes=entry_limit(target))
    marker = marker_id(summary)
    waking = False
    if resume:
        waking = await _check_resumable(target, path, marker)
    else:
        await _check_new(target, summary, marker)
    if not summary.sessions:
        return []
    started = {"v": 1, "file_sha256": summary.sha256, "sessions": len(summary.sessions),
               "entries": summary.entries}  # fmt: skip
    await target.append(marker, [NewEntry(MARKER_KIND, started)], key=f"import:{summary.sha256}")
    done = await _write(target, path, progress, answered=waking)
    key = f"import-waking:{summary.sha256}"
    await target.append(marker, [NewEntry(WAKING_KIND, {"v": 1})], key=key)
    for session in done:
        await give_wake(target, session.session_id, session.wake)
    await target.delete(marker)
    return done


async def _check_new(target: World, summary: FileSummary, marker: str) -> None:
    """Refuse the file if the target has any of its sessions."""
    there = [sid for sid in summary.sessions if await target.read(sid, 0, limit=1)]
    if not there:
        return
    names = ", ".join(map(repr, there[:5])) + (", ..." if len(there) > 5 else "")
    if await target.read(marker, 0, limit=1):
        hint = "an import of this file was interrupted: rerun it with --resume to finish it"
    else:
        hint = "import only creates sessions (fxworld copy brings one up to date from its source)"
    raise InvalidArgument(
        f"the target already has {len(there)} of the file's {len(summary.sessions)} sessions "
        f"({names}); nothing imported: {hint}"
    )


async def _check_resumable(target: World, path: Path, marker: str) -> bool:
    """Refuse to resume unless the target holds this file's marker, and each of the
    file's sessions it has is the start of the file's (or all of it and more, once
    the wakes began). Whether they began."""
    noted = await target.read(marker, 0, limit=10)
    waking = any(e.kind == WAKING_KIND for e in noted)
    if not noted:
        raise InvalidArgument(
            f"{path}: the target holds no interrupted import of this file (no session "
            f"{marker}): nothing to resume"
        )
    diverged: list[SessionDiverged] = []
    for sid, entries in _sessions(path):
        try:
            await _compare(target, sid, entries, answered=waking)
        except SessionDiverged as e:
            diverged.append(e)
    if diverged:
        raise all_diverged(diverged)
    return waking


def _sessions(path: Path) -> Iterator[tuple[str, Iterator[EntryRecord]]]:
    """The file's entry lines, session by session, read as they are used."""
    entries = (rec for _, rec in read_records(path) if isinstance(rec, EntryRecord))
    return groupby(entries, key=lambda rec: rec.entry.session_id)


async def _compare(
    target: World, sid: str, entries: Iterator[EntryRecord], *, answered: bool
) -> None:
    """Raise ``SessionDiverged`` unless the target's log of ``sid`` is the start of
    ``entries`` (or, if ``answered``, all of them and more); writes nothing."""
    replicator = Replicator(target, sid)
    for rec in entries:
        if not await replicator.holds(rec.entry, rec.key):
            return  # the target ends here
    if not answered:
        await replicator.finish()  # the file's session ended: the target holds no more


async def _write(
    target: World, path: Path, progress: Progress, *, answered: bool
) -> list[CopiedSession]:
    """Bring each session of the file in ``target`` up to it (no wake yet). If
    ``answered``, a session the target holds whole and more (a worker answered it
    after its wake) is imported, and owes no wake."""
    done: list[CopiedSession] = []
    current: Replicator | None = None
    due: datetime | None = None
    for _, rec in read_records(path):
        if isinstance(rec, WakeRecord):
            due = rec.due
            continue
        if current is not None and (
            isinstance(rec, EndRecord) or rec.entry.session_id != current.sid
        ):
            if answered and await current.answered():
                due = None  # imported, and answered by a worker since its wake
            else:
                await current.finish()
            done.append(CopiedSession(current.sid, current.fed, current.written, due))
            progress.session_done()
            current, due = None, None
        if isinstance(rec, EntryRecord):
            current = current or Replicator(target, rec.entry.session_id)
            await current.feed(rec.entry, rec.key)
            progress.entries(1)
    return done
