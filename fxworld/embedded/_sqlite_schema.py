"""The tables of an embedded SQLite world, their version and migration, and where
a large value is kept.

Version 1: sessions, entries, keys and wakes. Version 2 adds two things:

- **Agent routing (W19).** The owner of each session (``fx_sessions.agent``), copied
  to its wake (``fx_wakes.agent``) and indexed by owner, so an agent's due wakes are
  found without scanning other agents'. Sessions of a version 1 file have no owner:
  the first agent that prompts or runs one claims it.
- **Large values.** Entries are clustered by position (``fx_entries`` is a ``WITHOUT
  ROWID`` table keyed ``(namespace, session_id, seq)``: one b-tree to write, ranges
  to read). SQLite reads a whole record of such a table whenever a search compares
  its key with the one sought and the record overflows its page, so a 32 MiB entry
  kept in that b-tree was read whole by every append to its session after it (18 ms
  for a small append instead of 0.07) and by each read that passed it. Data over
  :data:`INLINE_BYTES` is therefore kept in ``fx_values``, a rowid table whose key
  is an integer, and the entry refers to it (``value``); the entry's own ``data`` is
  then empty. Both rows are written in the append's transaction, and a trigger
  deletes the value with its entry, so delete, prune and ``drop_namespace`` remove
  it as they remove the entry.

A version 1 file is upgraded in place by the first process that opens it
read-write, in one write transaction; opened read-only it is refused with the
command that upgrades it (its entries have no ``value`` column to read). A file
newer than this fxworld is refused.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from fxworld.errors import ConfigurationError

__all__ = [
    "SCHEMA_VERSION",
    "INLINE_BYTES",
    "LARGEST_ENTRY",
    "SELECT_ENTRIES",
    "migrate",
    "write_transaction",
    "insert_entries",
]

SCHEMA_VERSION = 2
"""1: the tables; 2: owners of sessions and wakes, and ``fx_values`` beside
``fx_entries`` for large values."""

INLINE_BYTES = 64 * 1024
"""Entry data longer than this (characters of JSON) is kept in ``fx_values``."""

LARGEST_ENTRY = 1_000_000_000 - 1024
"""The largest ``max_entry_bytes``: SQLite's ``SQLITE_MAX_LENGTH`` (its default build)
bounds one value, and one row, to 1,000,000,000 bytes."""

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS fx_sessions (
        namespace  TEXT    NOT NULL,
        session_id TEXT    NOT NULL,
        last_seq   INTEGER NOT NULL,  -- seq of the last entry, 0 for an empty log
        epoch      INTEGER NOT NULL,  -- newest epoch handed out or burnt by delete
        agent      TEXT,              -- its owner (W19); NULL: none recorded
        PRIMARY KEY (namespace, session_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS fx_entries (
        namespace  TEXT    NOT NULL,
        session_id TEXT    NOT NULL,
        seq        INTEGER NOT NULL,
        kind       TEXT    NOT NULL,
        data       TEXT    NOT NULL,  -- compact JSON object ('' when in fx_values)
        epoch      INTEGER,           -- NULL for an unfenced append
        at         REAL    NOT NULL,  -- commit time, seconds since the Unix epoch
        value      INTEGER,           -- the fx_values row holding the data, or NULL
        PRIMARY KEY (namespace, session_id, seq)
    ) WITHOUT ROWID""",  # clustered by position: one b-tree to write, ranges to read
    """CREATE TABLE IF NOT EXISTS fx_values (
        id   INTEGER PRIMARY KEY,
        data TEXT    NOT NULL         -- an entry's compact JSON over INLINE_BYTES
    )""",
    """CREATE TRIGGER IF NOT EXISTS fx_entries_value AFTER DELETE ON fx_entries
        WHEN OLD.value IS NOT NULL
        BEGIN DELETE FROM fx_values WHERE id = OLD.value; END""",
    """CREATE TABLE IF NOT EXISTS fx_keys (
        namespace  TEXT    NOT NULL,
        session_id TEXT    NOT NULL,
        key        TEXT    NOT NULL,
        seq        INTEGER NOT NULL,  -- last seq of the call that used the key
        PRIMARY KEY (namespace, session_id, key)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS fx_wakes (
        namespace   TEXT    NOT NULL,
        session_id  TEXT    NOT NULL,
        due         REAL,             -- NULL: no request beyond the one being handled
        gen         INTEGER NOT NULL, -- grows with every wake() request
        attempt     INTEGER NOT NULL, -- deliveries of the current request
        token       TEXT,             -- the current delivery's token
        lease_until REAL,             -- NULL when not leased
        taken_gen   INTEGER NOT NULL, -- gen when the current delivery was taken
        agent       TEXT,             -- the session's owner, kept in step (W19)
        PRIMARY KEY (namespace, session_id)
    ) WITHOUT ROWID""",
    """CREATE INDEX IF NOT EXISTS fx_wakes_ready
        ON fx_wakes (namespace, COALESCE(lease_until, due))""",
    """CREATE INDEX IF NOT EXISTS fx_wakes_agent
        ON fx_wakes (namespace, agent, COALESCE(lease_until, due))""",
)

_ADDED_IN_2 = {  # table -> the columns version 2 added to a version 1 table
    "fx_sessions": ("agent TEXT",),
    "fx_wakes": ("agent TEXT",),
    "fx_entries": ("value INTEGER",),
}

SELECT_ENTRIES = (
    "SELECT e.seq, e.kind, CASE WHEN e.value IS NULL THEN e.data"
    " ELSE (SELECT v.data FROM fx_values v WHERE v.id = e.value) END, e.epoch, e.at"
    " FROM fx_entries e WHERE e.namespace = ? AND e.session_id = ?"
)
"""The entries of a session as ``(seq, kind, data, epoch, at)``; the caller adds the
rest of the condition and the order (names qualified with ``e.``). A small entry's
data is its own (no join: small reads cost what they did)."""

_INSERT_ENTRY = (
    "INSERT INTO fx_entries (namespace, session_id, seq, kind, data, epoch, at, value)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One short write transaction, holding the write lock from its start."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def insert_entries(
    conn: sqlite3.Connection,
    rows: Sequence[tuple[str, str, int, str, str, int | None, float]],
) -> None:
    """Insert entries ``(namespace, session_id, seq, kind, data, epoch, at)`` in the
    caller's transaction, the data of each over :data:`INLINE_BYTES` in ``fx_values``."""
    if len(rows) == 1 and len(rows[0][4]) <= INLINE_BYTES:  # the common call: one entry
        conn.execute(_INSERT_ENTRY, (*rows[0], None))
        return
    if all(len(row[4]) <= INLINE_BYTES for row in rows):
        conn.executemany(_INSERT_ENTRY, [(*row, None) for row in rows])
        return
    for ns, sid, seq, kind, data, epoch, at in rows:
        value = None
        if len(data) > INLINE_BYTES:
            value = conn.execute("INSERT INTO fx_values (data) VALUES (?)", (data,)).lastrowid
            data = ""
        conn.execute(_INSERT_ENTRY, (ns, sid, seq, kind, data, epoch, at, value))


def migrate(conn: sqlite3.Connection, path: str, *, read_only: bool) -> None:
    """Bring the file's tables to :data:`SCHEMA_VERSION` (one transaction), or say
    why not: a newer file, or one not set up and opened read-only."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise ConfigurationError(
            f"sqlite world {path!r} has schema version {version}, newer than this "
            f"fxworld understands ({SCHEMA_VERSION}); upgrade fxworld"
        )
    if read_only:
        what = "is not set up" if version == 0 else "was made by an earlier fxworld"
        raise ConfigurationError(
            f"sqlite world {path!r} {what} (schema version {version}, opened "
            "read-only); `fxworld setup --world URL` sets it up"
        )
    with write_transaction(conn):
        for table, added in _ADDED_IN_2.items():  # a version 1 file's tables
            columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            for column in added:
                if columns and column.split()[0] not in columns:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
