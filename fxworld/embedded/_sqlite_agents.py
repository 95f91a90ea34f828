"""The SQLite world's agent routing (W19), run in its worker thread.

Each session's owner is ``fx_sessions.agent`` (NULL: none recorded), copied to its
wake row (``fx_wakes.agent``) when the wake is made and when the session is
claimed, so an agent's take reads the index ``fx_wakes_agent`` for its own wakes
and for nobody's, and never looks at another agent's.
"""

from __future__ import annotations

import sqlite3

from fxworld.embedded._sqlite_schema import write_transaction

__all__ = ["claim", "owner", "take_for", "rename", "ANY_DUE_FOR"]

_READY = "COALESCE(lease_until, due)"
_DUE_OF = (  # the earliest ready wakes of one owner (or of nobody's), by the index
    f"SELECT session_id, {_READY} AS ready FROM fx_wakes WHERE namespace = ? AND agent {{}}"
    f" AND {_READY} <= ? ORDER BY ready, session_id LIMIT ?"
)
ANY_DUE_FOR = (
    f"SELECT EXISTS (SELECT 1 FROM fx_wakes WHERE namespace = ? AND agent = ? AND {_READY} <= ?)"
    f" OR EXISTS (SELECT 1 FROM fx_wakes WHERE namespace = ? AND agent IS NULL"
    f" AND {_READY} <= ?)"
)
"""Whether ``take_for`` would find a wake: a read, so idle polling takes no lock."""
_TAKE_FOR = (
    "UPDATE fx_wakes SET attempt = attempt + 1, token = lower(hex(randomblob(16))),"
    " lease_until = ?, taken_gen = gen, due = NULL"
    " WHERE namespace = ? AND session_id IN (SELECT session_id FROM ("
    f"SELECT * FROM ({_DUE_OF.format('= ?')}) UNION ALL"
    f" SELECT * FROM ({_DUE_OF.format('IS NULL')})) ORDER BY ready, session_id LIMIT ?)"
    " RETURNING session_id, token, attempt, agent"
)


def claim(conn: sqlite3.Connection, ns: str, sid: str, agent: str) -> str:
    """Record ``agent`` as the owner of ``sid`` unless one is; the owner now."""
    with write_transaction(conn):
        row = conn.execute(
            "SELECT agent FROM fx_sessions WHERE namespace = ? AND session_id = ?", (ns, sid)
        ).fetchone()
        if row is not None and row[0] is not None:
            return str(row[0])
        if row is None:  # no log yet: a row with an empty log and no epoch, as acquire sees
            conn.execute(
                "INSERT INTO fx_sessions (namespace, session_id, last_seq, epoch, agent)"
                " VALUES (?, ?, 0, 0, ?)",
                (ns, sid, agent),
            )
        else:
            conn.execute(
                "UPDATE fx_sessions SET agent = ? WHERE namespace = ? AND session_id = ?",
                (agent, ns, sid),
            )
        conn.execute(
            "UPDATE fx_wakes SET agent = ? WHERE namespace = ? AND session_id = ?",
            (agent, ns, sid),
        )
        return agent


def owner(conn: sqlite3.Connection, ns: str, sid: str) -> str | None:
    """The recorded owner of ``sid``, or ``None``."""
    row = conn.execute(
        "SELECT agent FROM fx_sessions WHERE namespace = ? AND session_id = ?", (ns, sid)
    ).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def take_for(
    conn: sqlite3.Connection, ns: str, agent: str, now: float, until: float, limit: int
) -> list[tuple[str, str, int, str | None]]:
    """Lease up to ``limit`` ready wakes of ``agent``'s sessions and of nobody's,
    the earliest first: ``(session_id, token, attempt, owner)`` each."""
    if not conn.execute(ANY_DUE_FOR, (ns, agent, now, ns, now)).fetchone()[0]:
        return []
    with write_transaction(conn):
        rows = conn.execute(
            _TAKE_FOR, (until, ns, ns, agent, now, limit, ns, now, limit, limit)
        ).fetchall()
    return [(str(s), str(t), int(n), None if a is None else str(a)) for s, t, n, a in rows]


def rename(conn: sqlite3.Connection, ns: str, old: str, new: str) -> int:
    """Give every session of ``old`` to ``new`` (and their wakes); how many moved."""
    with write_transaction(conn):
        moved = conn.execute(
            "UPDATE fx_sessions SET agent = ? WHERE namespace = ? AND agent = ?", (new, ns, old)
        ).rowcount
        conn.execute(
            "UPDATE fx_wakes SET agent = ? WHERE namespace = ? AND agent = ?", (new, ns, old)
        )
    return int(moved)
