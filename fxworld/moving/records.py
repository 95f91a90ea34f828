"""The export file: JSON Lines, one object a line, each with its type in ``"t"``.

1. the header, first: ``{"t": "header", "format": "fxworld-sessions", "version": 1,
   "exported_at": ISO 8601}``;
2. one line per entry, a session's entries together and in order from seq 1:
   ``{"t": "entry", "session", "seq", "kind", "data", "epoch", "at", "key"}``
   (``epoch`` ``null`` for an unfenced entry, ``key`` the idempotency key the engine
   used, or ``null``: :func:`~fxworld.moving.derived.engine_key`);
3. after a session's entries, if it has a pending wake: ``{"t": "wake", "session",
   "due": ISO 8601}``;
4. the end, last: ``{"t": "end", "sessions": n, "entries": m}``. A file without it
   was cut short (an export that did not finish) and is refused.

A reader refuses a file of another format or a newer version, and any line that
does not parse (JSON nested deeper than the parser's recursion allows included),
with :class:`~fxworld.errors.InvalidArgument` naming the line. A message quotes at
most the first 40 characters of a value, and no container.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fxworld import validate
from fxworld.errors import InvalidArgument, WorldError
from fxworld.types import Entry

__all__ = [
    "FORMAT",
    "VERSION",
    "EntryRecord",
    "WakeRecord",
    "EndRecord",
    "header_line",
    "entry_line",
    "wake_line",
    "end_line",
    "parse_line",
    "check_header",
]

FORMAT = "fxworld-sessions"
VERSION = 1


@dataclass(frozen=True)
class EntryRecord:
    """An entry line: the entry as the source read it, and its engine key."""

    entry: Entry
    key: str | None


@dataclass(frozen=True)
class WakeRecord:
    """A wake line: the session's pending wake and when it is due."""

    session_id: str
    due: datetime


@dataclass(frozen=True)
class EndRecord:
    """The end line: how many sessions and entries the file holds."""

    sessions: int
    entries: int


def _dump(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


def header_line() -> str:
    now = datetime.now(UTC).isoformat()
    return _dump({"t": "header", "format": FORMAT, "version": VERSION, "exported_at": now})


def entry_line(e: Entry, key: str | None) -> str:
    return _dump(
        {"t": "entry", "session": e.session_id, "seq": e.seq, "kind": e.kind, "data": e.data,
         "epoch": e.epoch, "at": e.at.isoformat(), "key": key}
    )  # fmt: skip


def wake_line(session_id: str, due: datetime) -> str:
    return _dump({"t": "wake", "session": session_id, "due": due.isoformat()})


def end_line(sessions: int, entries: int) -> str:
    return _dump({"t": "end", "sessions": sessions, "entries": entries})


def parse_line(line: str, where: str) -> EntryRecord | WakeRecord | EndRecord:
    """One line after the header; ``where`` (file and line number) heads any error."""
    try:
        obj = json.loads(line)
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        return _record(obj)
    except (ValueError, KeyError, TypeError, WorldError) as e:
        raise InvalidArgument(f"{where}: not a line of an fxworld export ({e})") from None
    except RecursionError:
        raise InvalidArgument(f"{where}: not a line of an fxworld export ({_DEEP})") from None


def check_header(line: str, where: str) -> None:
    """Refuse a first line that is not this format's header, or a newer version."""
    try:
        obj = json.loads(line)
    except ValueError:
        obj = None
    except RecursionError:
        raise InvalidArgument(f"{where}: not an fxworld export ({_DEEP})") from None
    if not isinstance(obj, dict) or obj.get("t") != "header" or obj.get("format") != FORMAT:
        raise InvalidArgument(f"{where}: not an fxworld export (no {FORMAT!r} header)")
    if obj.get("version") != VERSION:
        raise InvalidArgument(
            f"{where}: export format version {_shown(obj.get('version'))}; this fxworld reads "
            f"version {VERSION}"
        )


_DEEP = "its JSON is nested too deeply"


def _shown(value: object) -> str:
    """``value`` for a message: a container by its type only, else its repr cut to 40
    characters (a line may hold megabytes, or nesting that repr cannot walk)."""
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _record(obj: dict[str, Any]) -> EntryRecord | WakeRecord | EndRecord:
    t = obj["t"]
    if t == "entry":
        return _entry(obj)
    if t == "wake":
        return WakeRecord(validate.session_id(obj["session"]), _time(obj["due"]))
    if t == "end":
        return EndRecord(_count(obj["sessions"]), _count(obj["entries"]))
    raise ValueError(f"unknown line type {_shown(t)}")


def _entry(obj: dict[str, Any]) -> EntryRecord:
    sid = validate.session_id(obj["session"])
    seq, kind, data, epoch, key = (obj[k] for k in ("seq", "kind", "data", "epoch", "key"))
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ValueError(f"seq {_shown(seq)} is not a position")
    if not isinstance(kind, str) or not 1 <= len(kind) <= 64:
        raise ValueError(f"kind {_shown(kind)} is not 1..64 characters")
    if not isinstance(data, dict):
        raise ValueError("data is not a JSON object")
    if epoch is not None and (not isinstance(epoch, int) or isinstance(epoch, bool)):
        raise ValueError(f"epoch {_shown(epoch)} is not an integer")
    if key is not None and (not isinstance(key, str) or not 1 <= len(key) <= 256):
        raise ValueError("key is not a string of 1..256 characters")
    return EntryRecord(Entry(sid, seq, kind, data, epoch, _time(obj["at"])), key)


def _time(value: object) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"time {_shown(value)} is not ISO 8601")
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"time {_shown(value)} is not ISO 8601") from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"count {_shown(value)} is not a number")
    return value
