"""The SQLite world's schema, its version and its migrations.

Version 1: sessions, entries, keys and wakes. Version 2 (agent routing, W19): the
owner of each session (``fx_sessions.agent``), copied to its wake
(``fx_wakes.agent``) and indexed by owner, so an agent's due wakes are found
without scanning other agents'. A version 1 file is upgraded in place by the first
process that opens it read-write, in one write transaction (its sessions have no
owner: the first agent that prompts or runs one claims it); opened read-only, it
is read as it is (its logs and wakes; it has no owners to show). A file newer than
this fxworld is refused.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from fxworld.errors import ConfigurationError

__all__ = ["SCHEMA_VERSION", "migrate", "write"]

SCHEMA_VERSION = 2


_SCHEMA_1 = (
    """CREATE TABLE IF NOT EXISTS fx_sessions (
        namespace  TEXT    NOT NULL,
        session_id TEXT    NOT NULL,
        last_seq   INTEGER NOT NULL,  -- seq of the last entry, 0 for an empty log
        epoch      INTEGER NOT NULL,  -- newest epoch handed out or burnt by delete
        PRIMARY KEY (namespace, session_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS fx_entries (
        namespace  TEXT    NOT NULL,
        session_id TEXT    NOT NULL,
        seq        INTEGER NOT NULL,
        kind       TEXT    NOT NULL,
        data       TEXT    NOT NULL,  -- compact JSON object
        epoch      INTEGER,           -- NULL for an unfenced append
        at         REAL    NOT NULL,  -- commit time, seconds since the Unix epoch
        PRIMARY KEY (namespace, session_id, seq)
    ) WITHOUT ROWID""",  # clustered by position: one b-tree to write, ranges to read
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
        PRIMARY KEY (namespace, session_id)
    ) WITHOUT ROWID""",
    """CREATE INDEX IF NOT EXISTS fx_wakes_ready
        ON fx_wakes (namespace, COALESCE(lease_until, due))""",
)


_SCHEMA_2 = (
    "ALTER TABLE fx_sessions ADD COLUMN agent TEXT",  # NULL: no owner recorded
    "ALTER TABLE fx_wakes ADD COLUMN agent TEXT",  # the session's owner, kept in step
    """CREATE INDEX IF NOT EXISTS fx_wakes_agent
        ON fx_wakes (namespace, agent, COALESCE(lease_until, due))""",
)
_STEPS = {1: _SCHEMA_1, 2: _SCHEMA_2}
"""The statements that bring a file from the version before to this one."""


@contextmanager
def write(conn: sqlite3.Connection) -> Iterator[None]:
    """One short write transaction, holding the write lock from its start."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, path: str, *, read_only: bool) -> None:
    """Bring the file to :data:`SCHEMA_VERSION`: idempotent, and safe when several
    processes open it at once (the version is read again under the write lock)."""
    version = _version(conn)
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise ConfigurationError(
            f"sqlite world {path!r} has schema version {version}, newer than this "
            f"fxworld understands ({SCHEMA_VERSION}); upgrade fxworld"
        )
    if read_only and version >= 1:  # read as it is: the first read-write open upgrades it
        return
    if read_only:
        raise ConfigurationError(
            f"sqlite world {path!r} is not set up (schema version {version}, opened "
            "read-only); `fxworld setup --world URL` sets it up"
        )
    with write(conn):
        for step in range(_version(conn) + 1, SCHEMA_VERSION + 1):
            for statement in _STEPS[step]:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
