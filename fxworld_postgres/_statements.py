"""The SQL a world sends (one namespace's statements, built once) and the codec of
its rows: entries in and out of ``entries``. The schema they run on, and the
plpgsql functions they call, are ``_schema``'s."""

from __future__ import annotations

import re
from typing import Any

from fxworld import jsondata
from fxworld.types import Entry

__all__ = ["FOLLOW_PAGE", "Statements", "entry", "jsonb_safe", "kind_in", "kind_out"]

FOLLOW_PAGE = 1000  # entries per follow read


class Statements:
    """The SQL of one namespace, built once (asyncpg caches the prepared statements)."""

    def __init__(self, s: str) -> None:
        self.append = (
            f"SELECT o_seq, o_followed FROM {s}.fx_append_quiet($1, $2, $3, $4, $5, $6, $7, $8)"
        )
        self.notify = "SELECT pg_notify($1, sid) FROM unnest($2::text[]) AS sid"
        self.acquire = f"SELECT o_epoch, o_seq FROM {s}.fx_acquire($1)"
        self.read = (
            f"SELECT seq, kind, coalesce(raw, data::text), epoch, at FROM {s}.entries "
            "WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
        )
        # the reads of several followers in one statement: request i's slice, in order
        self.read_many = (
            "SELECT q.i, e.seq, e.kind, e.data, e.epoch, e.at "
            "FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS q(sid, after, i) "
            "CROSS JOIN LATERAL (SELECT seq, kind, coalesce(raw, data::text) AS data, "
            f"epoch, at FROM {s}.entries WHERE session_id = q.sid AND seq > q.after "
            "ORDER BY seq LIMIT $3) AS e ORDER BY q.i, e.seq"
        )
        self.wake = f"SELECT {s}.fx_wake($1, $2)"
        self.take = f"SELECT session_id, token, attempt, expires_at FROM {s}.fx_take_wakes($1, $2)"
        self.take_for = (
            "SELECT session_id, token, attempt, expires_at, agent "
            f"FROM {s}.fx_take_wakes_for($1, $2, $3)"
        )
        self.claim = f"SELECT {s}.fx_claim($1, $2)"
        self.owner = f"SELECT agent FROM {s}.sessions WHERE session_id = $1"
        self.rename = (
            f"WITH moved AS (UPDATE {s}.sessions SET agent = $2 WHERE agent = $1 "
            f"RETURNING session_id), w AS (UPDATE {s}.wakes SET agent = $2 WHERE agent = $1) "
            "SELECT count(*) FROM moved"
        )
        self.renew = f"SELECT {s}.fx_renew_wake($1, $2, $3)"
        self.finish = f"SELECT {s}.fx_finish_wake($1, $2)"
        self.delete = f"SELECT {s}.fx_delete($1)"
        self.last = (
            f"SELECT seq, kind, coalesce(raw, data::text), epoch, at FROM {s}.entries "
            "WHERE session_id = $1 ORDER BY seq DESC LIMIT 1"
        )
        # one statement, so one snapshot and all or nothing; the row lock of the
        # UPDATE orders it with appends (which lock the same row first)
        self.delete_if_idle = (
            f"WITH gone AS (UPDATE {s}.sessions SET epoch = epoch + 1, last_seq = 0, agent = NULL "
            "WHERE session_id = $1 AND last_seq = $2 "
            f"AND NOT EXISTS (SELECT 1 FROM {s}.wakes WHERE session_id = $1) "
            "RETURNING session_id, followers), "
            f"e AS (DELETE FROM {s}.entries WHERE session_id IN (SELECT session_id FROM gone)), "
            f"k AS (DELETE FROM {s}.keys WHERE session_id IN (SELECT session_id FROM gone)) "
            "SELECT followers > 0 FROM gone"
        )
        self.sessions = (
            f"SELECT session_id FROM {s}.sessions WHERE last_seq > 0 AND session_id > $1 "
            "ORDER BY session_id LIMIT $2"
        )
        # WakeLister: due is the pending request's time, else (taken, no request since)
        # the lease's end, when it is delivered again (W12); a lease that ran out holds
        # nothing, so it is shown as NULL
        wake_columns = (
            "SELECT session_id, coalesce(due, lease_until), "
            f"CASE WHEN lease_until > now() THEN lease_until END, attempt FROM {s}.wakes "
        )
        self.wake_state = wake_columns + "WHERE session_id = $1"
        self.wakes = wake_columns + "WHERE session_id > $1 ORDER BY session_id LIMIT $2"
        self.follow_add = (
            f"INSERT INTO {s}.follows (session_id, pid) SELECT unnest($1::text[]), "
            "pg_backend_pid() ON CONFLICT DO NOTHING"
        )
        self.follow_remove = (
            f"DELETE FROM {s}.follows WHERE session_id = $1 AND pid = pg_backend_pid()"
        )
        self.follow_drop_own = f"DELETE FROM {s}.follows WHERE pid = pg_backend_pid()"
        self.follow_gc = (
            f"DELETE FROM {s}.follows WHERE pid = pg_backend_pid() "
            "OR pid NOT IN (SELECT pid FROM pg_stat_activity)"
        )


def entry(session_id: str, row: Any) -> Entry:
    """An entry from a row ``(seq, kind, data as JSON text, epoch, at)``."""
    return Entry(session_id, row[0], kind_in(row[1]), jsondata.decode(row[2]), row[3], row[4])


LARGEST_ENTRY = (1 << 30) - (1 << 20)
"""The largest ``max_entry_bytes``: a PostgreSQL field, and a protocol message, hold
less than 1 GiB (room is left for the rest of the append's message)."""

JSONB_BYTES = 1 << 20
"""Data longer than this (in characters of JSON) is stored as text in ``raw``: a large
value is written at the cost of its bytes, with no jsonb parse (docs/large-values.md)."""


def jsonb_safe(data: str) -> bool:
    """Whether ``data`` goes to the ``jsonb`` column: jsonb gives it back unchanged (it
    refuses ``\\u0000`` and turns floats with a positive exponent, ``1e+23``, into
    integers) and it is not a large value (:data:`JSONB_BYTES`)."""
    return len(data) <= JSONB_BYTES and "\\u0000" not in data and "e+" not in data


_KIND_ESCAPE = re.compile(r"[\\\x00\ud800-\udfff]")
_KIND_UNESCAPE = re.compile(r"\\(\\|u[0-9a-f]{4})")


def kind_out(kind: str) -> str:
    """A kind as stored: PostgreSQL text holds no NUL and no lone surrogate."""
    if _KIND_ESCAPE.search(kind) is None:
        return kind
    return _KIND_ESCAPE.sub(lambda m: "\\\\" if m[0] == "\\" else f"\\u{ord(m[0]):04x}", kind)


def kind_in(stored: str) -> str:
    if "\\" not in stored:
        return stored
    return _KIND_UNESCAPE.sub(lambda m: "\\" if m[1] == "\\" else chr(int(m[1][1:], 16)), stored)
