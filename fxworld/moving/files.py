"""Export sessions to a file (:mod:`~fxworld.moving.records`) and import them back.

:func:`import_file` reads the whole file twice: first it checks every line (the
header and its version, each line's shape, each session's entries dense from 1 and
writable through the protocol, the end line and its counts), and only then writes.
A missing file, a wrong version, a corrupt or cut file writes nothing at all. The
writing is the copy's (:class:`~fxworld.moving.replicate.Replicator`), so an import
that was interrupted, rerun, finishes with no duplicate.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TextIO

from fxworld import validate
from fxworld.errors import InvalidArgument, WorldError
from fxworld.protocol import World
from fxworld.types import NewEntry

from . import records
from .derived import OpenTurns, engine_key
from .records import EndRecord, EntryRecord, WakeRecord
from .replicate import Replicator, Reproducible, read_pages
from .transfer import SILENT, CopiedSession, Progress, give_wake, pending_wake

__all__ = ["export_sessions", "import_file", "check_file", "FileSummary"]


async def export_sessions(
    world: World, ids: Sequence[str], out: TextIO, progress: Progress = SILENT
) -> int:
    """Write sessions ``ids`` of ``world`` to ``out``; returns the entries written."""
    out.write(records.header_line())
    total = 0
    for sid in ids:
        turns = OpenTurns()
        async for page in read_pages(world, sid):
            for entry in page:
                key = engine_key(entry)
                out.write(records.entry_line(entry, key))
                turns.see(entry)
            total += len(page)
            progress.entries(len(page))
        due = await pending_wake(world, sid, turns)
        if due is not None:
            out.write(records.wake_line(sid, due))
        progress.session_done()
    out.write(records.end_line(len(ids), total))
    return total


@dataclass
class FileSummary:
    """What :func:`check_file` found: the sessions in file order, and entries."""

    sessions: list[str] = field(default_factory=list)
    entries: int = 0
    last_seq: int = 0
    """The last seq seen of the session being read."""


def _lines(path: Path) -> Iterator[tuple[str, str]]:
    """(where, line) for each line after the header, which it checks."""
    try:
        f = path.open(encoding="utf-8")
    except OSError as e:
        raise InvalidArgument(f"{path}: cannot read it ({os.strerror(e.errno or 0)})") from None
    with f:
        try:
            first = f.readline()
            records.check_header(first, f"{path}:1")
            for n, line in enumerate(f, 2):
                yield f"{path}:{n}", line
        except UnicodeDecodeError:
            raise InvalidArgument(f"{path}: not UTF-8 text") from None


def check_file(path: Path) -> FileSummary:
    """Check every line of an export without writing anything."""
    summary = FileSummary()
    check: Reproducible | None = None
    done: set[str] = set()
    end: EndRecord | None = None
    for where, line in _lines(path):
        if end is not None:
            raise InvalidArgument(f"{where}: a line after the end line")
        rec = records.parse_line(line, where)
        if isinstance(rec, EndRecord):
            end = rec
        elif isinstance(rec, WakeRecord):
            if check is None or rec.session_id != check.sid:
                raise InvalidArgument(f"{where}: a wake not after its session's entries")
        else:
            check = _check_entry(rec, check, done, summary, where)
    if end is None:
        raise InvalidArgument(f"{path}: no end line: the file was cut short")
    if (end.sessions, end.entries) != (len(summary.sessions), summary.entries):
        raise InvalidArgument(
            f"{path}: the end line counts {end.sessions} sessions and {end.entries} entries; "
            f"the file holds {len(summary.sessions)} and {summary.entries}"
        )
    return summary


def _check_entry(
    rec: EntryRecord, check: Reproducible | None, done: set[str], s: FileSummary, where: str
) -> Reproducible:
    e = rec.entry
    if check is None or e.session_id != check.sid:
        if e.session_id in done:
            raise InvalidArgument(f"{where}: session {e.session_id!r} appears twice")
        done.add(e.session_id)
        s.sessions.append(e.session_id)
        check, expected = Reproducible(e.session_id), 1
    else:
        expected = s.last_seq + 1
    if e.seq != expected:
        raise InvalidArgument(f"{where}: seq {e.seq} where {expected} was due")
    s.last_seq = e.seq
    try:
        check.see(e)
        if e.kind != "fence":
            validate.entries([NewEntry(e.kind, e.data)])
    except WorldError as err:  # the entry's own check (W15) or one no caller can write
        raise InvalidArgument(f"{where}: {err}") from None
    s.entries += 1
    return check


async def import_file(
    target: World, path: Path, progress: Progress = SILENT, *, checked: FileSummary | None = None
) -> list[CopiedSession]:
    """Check the export at ``path`` whole (:func:`check_file`, unless ``checked`` is
    what it returned for this file), then bring each of its sessions in ``target`` up
    to it and give it its wake."""
    if checked is None:
        check_file(path)
    done: list[CopiedSession] = []
    current: Replicator | None = None
    due: datetime | None = None
    for where, line in _lines(path):
        rec = records.parse_line(line, where)
        if isinstance(rec, WakeRecord):
            due = rec.due
            continue
        if current is not None and (
            isinstance(rec, EndRecord) or rec.entry.session_id != current.sid
        ):
            done.append(await _close(target, current, due, progress))
            current, due = None, None
        if isinstance(rec, EntryRecord):
            current = current or Replicator(target, rec.entry.session_id)
            await current.feed(rec.entry, rec.key)
            progress.entries(1)
    return done


async def _close(
    target: World, replicator: Replicator, due: datetime | None, progress: Progress
) -> CopiedSession:
    written = await replicator.finish()
    await give_wake(target, replicator.sid, due)
    progress.session_done()
    return CopiedSession(replicator.sid, replicator.fed, written, due)
