"""Export sessions to a file (:mod:`~fxworld.moving.records`), and check one whole.

:func:`check_file` reads a file once and checks every line: the header and its
version, each line's shape, each session's entries dense from 1 and writable
through the protocol within the target's ``max_entry_bytes`` (W15), the end line
and its counts. It also hashes the file, which names an import of it
(:mod:`~fxworld.moving.importing`). :func:`spooled` gives a pipe (``/dev/stdin``,
``-``) a regular file's place, since an import reads its file more than once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from fxworld import validate
from fxworld.errors import InvalidArgument, WorldError
from fxworld.protocol import World
from fxworld.types import NewEntry

from . import records
from .derived import OpenTurns, engine_key
from .records import EndRecord, EntryRecord, WakeRecord
from .replicate import Reproducible, read_pages
from .transfer import SILENT, Progress, pending_wake

__all__ = [
    "export_sessions",
    "check_file",
    "entry_limit",
    "FileSummary",
    "Record",
    "read_records",
    "spooled",
]


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


@contextmanager
def spooled(name: str) -> Iterator[Path]:
    """The file ``name`` (``-`` for stdin) as a path that can be read more than once:
    itself if it is a regular file, else (a pipe) a temporary copy of everything it
    gives, removed on exit."""
    path = Path("/dev/stdin" if name == "-" else name)
    if _regular(path, name):
        yield path
        return
    with tempfile.NamedTemporaryFile(prefix="fxworld-import-", suffix=".jsonl") as copy:
        try:
            with path.open("rb") as f:
                shutil.copyfileobj(f, copy)  # the only read of the pipe
            copy.flush()
        except OSError as e:
            raise _unreadable(name, e) from None
        yield Path(copy.name)


def _regular(path: Path, name: str) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError as e:
        raise _unreadable(name, e) from None


def _unreadable(name: str | Path, e: OSError) -> InvalidArgument:
    return InvalidArgument(f"{name}: cannot read it ({os.strerror(e.errno or 0)})")


@dataclass
class FileSummary:
    """What :func:`check_file` found."""

    sessions: list[str] = field(default_factory=list)
    """The sessions, in file order."""
    entries: int = 0
    sha256: str = ""
    """The SHA-256 of the file's bytes, in hex: what names an import of this file."""


Record = EntryRecord | WakeRecord | EndRecord


def _ignore(raw: bytes) -> None:
    pass


def read_records(
    path: Path, hashed: Callable[[bytes], object] = _ignore
) -> Iterator[tuple[str, Record]]:
    """(where, record) for each line after the header, which it checks; each line's
    bytes, the header's first, go to ``hashed``."""
    try:
        f = path.open("rb")
    except OSError as e:
        raise _unreadable(path, e) from None
    with f:
        first = f.readline()
        hashed(first)
        records.check_header(_text(first, f"{path}:1"), f"{path}:1")
        for n, raw in enumerate(f, 2):
            hashed(raw)
            yield f"{path}:{n}", records.parse_line(_text(raw, f"{path}:{n}"), f"{path}:{n}")


def _text(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidArgument(f"{where}: not UTF-8 text") from None


def check_file(
    path: Path, *, max_entry_bytes: int = validate.DEFAULT_MAX_ENTRY_BYTES
) -> FileSummary:
    """Check every line of an export without writing anything, each entry against
    ``max_entry_bytes`` (the target's: :func:`entry_limit`)."""
    summary, digest = FileSummary(), hashlib.sha256()
    check: Reproducible | None = None
    done: set[str] = set()
    end: EndRecord | None = None
    for where, rec in read_records(path, digest.update):
        if end is not None:
            raise InvalidArgument(f"{where}: a line after the end line")
        if isinstance(rec, EndRecord):
            end = rec
        elif isinstance(rec, WakeRecord):
            if check is None or rec.session_id != check.sid:
                raise InvalidArgument(f"{where}: a wake not after its session's entries")
        else:
            check = _check_entry(rec, check, done, summary, where, max_entry_bytes)
    if end is None:
        raise InvalidArgument(f"{path}: no end line: the file was cut short")
    if (end.sessions, end.entries) != (len(summary.sessions), summary.entries):
        raise InvalidArgument(
            f"{path}: the end line counts {end.sessions} sessions and {end.entries} entries; "
            f"the file holds {len(summary.sessions)} and {summary.entries}"
        )
    summary.sha256 = digest.hexdigest()
    return summary


def entry_limit(world: World) -> int:
    """The largest entry ``world`` takes, in encoded bytes (its ``max_entry_bytes``,
    W15; the default for a world that does not say)."""
    limit = getattr(world, "max_entry_bytes", validate.DEFAULT_MAX_ENTRY_BYTES)
    return limit if isinstance(limit, int) else validate.DEFAULT_MAX_ENTRY_BYTES


def _check_entry(
    rec: EntryRecord,
    check: Reproducible | None,
    done: set[str],
    s: FileSummary,
    where: str,
    limit: int,
) -> Reproducible:
    e = rec.entry
    if check is None or e.session_id != check.sid:
        if e.session_id in done:
            raise InvalidArgument(f"{where}: session {e.session_id!r} appears twice")
        done.add(e.session_id)
        s.sessions.append(e.session_id)
        check, expected = Reproducible(e.session_id), 1
    else:
        expected = check.seen + 1
    if e.seq != expected:
        raise InvalidArgument(f"{where}: seq {e.seq} where {expected} was due")
    try:
        check.see(e)
        if e.kind != "fence":
            validate.entries([NewEntry(e.kind, e.data)], max_bytes=limit)
    except WorldError as err:  # the entry's own check (W15) or one no caller can write
        raise InvalidArgument(f"{where}: {err}") from None
    s.entries += 1
    return check
