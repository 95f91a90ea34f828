"""SqliteWorld: the embedded default world, one SQLite file shared by processes.

URL: ``sqlite:///relative/path.db`` (relative to the working directory) or
``sqlite:////absolute/path.db``, with optional query parameters ``namespace=``,
``synchronous=normal|full``, ``busy_timeout=`` (seconds), ``max_entry_bytes=``
and ``mode=rwc|rw|ro``. With no URL at all, :func:`fxworld.world` opens
``sqlite:///.fxworld/world.db``.

``mode`` (SQLite's own word for it) says whether the world may create its file:
``rwc`` (the default) creates the file and its missing parent directories;
``rw`` opens only a file that exists; ``ro`` opens an existing world read-only
(every write raises :class:`~fxworld.errors.ConfigurationError`, and the file
is never changed). With ``rw`` or ``ro`` a missing file is a one-line
``ConfigurationError``, and nothing is created: ``fxworld sessions`` reads with
``ro``, so a typo in the path is an error, not a new, empty world.

Capabilities: ``durable`` and ``shared``. Every guarantee W1-W19 holds, also when
several OS processes open the same file at once:

- The file is in WAL mode: readers never block writers nor wait for them. Every
  write (an append with its key and wake, an acquire, a delete, a wake, taking a
  wake or a batch of them, finishing a lease) is one short ``BEGIN IMMEDIATE``
  transaction, so the per-session seq and epoch are read and allocated under the
  write lock and two writers can never interleave. A writer that waits longer
  than ``busy_timeout`` for the lock is retried a few times; after that the call
  raises :class:`~fxworld.errors.BackendUnavailable` (an append may then be
  retried with the same ``key``). A process killed mid-transaction leaves nothing of it
  behind (SQLite's atomic commit): no torn batch, and an append's wake is in
  the same transaction as its entries, so it is never lost.
- ``follow()`` polls ``PRAGMA data_version`` (a cheap, in-memory check) every
  20 ms while someone follows, and is woken at once by writes made through the
  same world object, so new entries arrive well within 100 ms of their commit.
  A write wakes only the followers of its own session; a commit by another
  connection costs one query of the followed sessions' last seqs, which then wakes
  only the followers whose session grew past their cursor. Hundreds of idle
  followers in one process thus cost the writers nothing.
- SQLite calls run in one dedicated thread per world, never on the event loop.
- Namespaces are a column of every table: two namespaces in one file share
  nothing (no entry, key, epoch or wake).

Durability. With the default ``synchronous="normal"`` an acknowledged write
survives a crash or SIGKILL of any process: in WAL mode a commit is in the
operating system's hands when ``append`` returns, and SQLite never corrupts the
file nor keeps half a transaction. What a power loss or an operating-system crash
can cost: the most recent commits that the OS had not yet written to the disk.
That is typically the last few seconds of writes (Linux writes dirty pages back
within about 30 s), and at most everything since the last WAL checkpoint (about
4 MB of WAL by default). The database stays consistent: every batch is whole or
absent, with its wake. For durability across power loss, pass
``synchronous="full"`` (or ``?synchronous=full`` in the URL): every commit is then
synced to disk before ``append`` returns, at the cost of an fsync per write
(``benchmarks/bench_sqlite.py`` prints both figures). Do not put the file on a
network file system: SQLite's locking is not reliable there.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
import time
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

from fxworld import jsondata, validate
from fxworld.embedded import _sqlite_agents as agents
from fxworld.embedded._sqlite_errors import is_busy, translate, translate_os
from fxworld.embedded._sqlite_schema import (
    LARGEST_ENTRY,
    SELECT_ENTRIES,
    insert_entries,
    migrate,
    write_transaction,
)
from fxworld.embedded._sqlite_thread import SqliteThread, release
from fxworld.errors import ConfigurationError, Conflict, Fenced, LeaseLost
from fxworld.types import Entry, Fence, NewEntry, WakeLease, WakeState
from fxworld.urls import mask, split_query

__all__ = ["SqliteWorld"]

T = TypeVar("T")

_READY = "COALESCE(lease_until, due)"
_ANY_DUE = f"SELECT 1 FROM fx_wakes WHERE namespace = ? AND {_READY} <= ? LIMIT 1"
_TAKE_DUE = (  # W11: only due ones; W12: a leased one is ready only when its lease ends
    "UPDATE fx_wakes SET attempt = attempt + 1, token = lower(hex(randomblob(16))),"
    " lease_until = ?, taken_gen = gen, due = NULL"  # W13: taken_gen marks what was taken
    " WHERE namespace = ? AND session_id IN ("
    f"SELECT session_id FROM fx_wakes WHERE namespace = ? AND {_READY} <= ?"
    f" ORDER BY {_READY}, session_id LIMIT ?) RETURNING session_id, token, attempt, agent"
)
_UPSERT_WAKE = (
    "INSERT INTO fx_wakes (namespace, session_id, due, gen, attempt, token, lease_until,"
    " taken_gen, agent) VALUES (?, ?, ?, 1, 0, NULL, NULL, 0, (SELECT agent FROM fx_sessions"
    " WHERE namespace = ?1 AND session_id = ?2))"
    " ON CONFLICT (namespace, session_id) DO UPDATE SET gen = gen + 1,"
    " due = CASE WHEN due IS NULL THEN excluded.due ELSE MIN(due, excluded.due) END"
)
# WakeLister: due is the pending request's time, else (taken, no request since) the
# lease's end, when it is delivered again (W12); a lease that ran out holds nothing.
_WAKE_STATE = (
    "SELECT session_id, COALESCE(due, lease_until), lease_until, attempt FROM fx_wakes"
    " WHERE namespace = ?"
)
_UPSERT_SESSION = (
    "INSERT INTO fx_sessions (namespace, session_id, last_seq, epoch) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (namespace, session_id) DO UPDATE"
    " SET last_seq = excluded.last_seq, epoch = excluded.epoch"
)
_SYNCHRONOUS = ("normal", "full")
MODES = ("rwc", "rw", "ro")
"""``mode``: create the file if needed, open an existing file, open it read-only."""
_URL_PARAMS = ("namespace", "synchronous", "busy_timeout", "max_entry_bytes", "mode")


class SqliteWorld:
    """A World in one SQLite file, shared safely by every process that opens it.

    ``path``: the database file (created with its parent directories, unless
    ``mode`` says otherwise).
    ``namespace``: worlds with different namespaces in one file share nothing.
    ``max_entry_bytes``: the limit on one entry's encoded data (W15).
    ``synchronous``: ``"normal"`` (default; durable against process crashes) or
    ``"full"`` (also durable against power loss; one fsync per write).
    ``busy_timeout``: seconds a writer waits for another process's write lock
    before a retry; after ``retries`` retries the call raises
    ``BackendUnavailable``.
    ``mode``: ``"rwc"`` (default) creates the file if needed; ``"rw"`` opens only
    an existing file; ``"ro"`` opens an existing file read-only (writes raise
    ``ConfigurationError``). A missing file with ``"rw"`` or ``"ro"`` is a
    ``ConfigurationError`` at the first call, and nothing is created.
    """

    capabilities: frozenset[str] = frozenset({"durable", "shared"})

    poll_interval: float = 0.02
    """Seconds between two ``PRAGMA data_version`` checks while someone follows."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: str = "default",
        max_entry_bytes: int = validate.DEFAULT_MAX_ENTRY_BYTES,
        synchronous: str = "normal",
        busy_timeout: float = 5.0,
        retries: int = 3,
        mode: str = "rwc",
    ) -> None:
        self.path = os.fspath(path)
        if not isinstance(self.path, str) or not self.path or self.path == ":memory:":
            raise ConfigurationError(
                f"SqliteWorld needs a file path, not {self.path!r} (use memory:// for a "
                "world in memory)"
            )
        self.namespace = validate.namespace(namespace)
        self.max_entry_bytes = validate.max_entry_bytes(
            max_entry_bytes, largest=LARGEST_ENTRY, why="SQLite's length limit of one value"
        )
        if not isinstance(synchronous, str) or synchronous.lower() not in _SYNCHRONOUS:
            raise ConfigurationError(
                f"synchronous must be one of {', '.join(_SYNCHRONOUS)}, not {synchronous!r}"
            )
        self.synchronous = synchronous.lower()
        self.busy_timeout = validate.seconds_option("busy_timeout", busy_timeout)
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise ConfigurationError(f"retries must be an integer >= 0, not {retries!r}")
        self.retries = retries
        if mode not in MODES:
            raise ConfigurationError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        # Only the worker thread touches the connection.
        self._conn: sqlite3.Connection | None = None
        # The connection as the finalizer sees it (it must not hold the world).
        self._held: list[sqlite3.Connection] = []
        self._worker: SqliteThread | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        # Change notification for follow(), per followed session: its generation is
        # bumped by our own writes of it, and by the poller when another connection
        # committed (PRAGMA data_version changed) and the session grew. Its waiters
        # are (cursor, future) pairs.
        self._generations: dict[str, int] = {}
        self._data_version: int | None = None
        self._waiters: dict[str, list[tuple[int, asyncio.Future[None]]]] = {}
        self._following: dict[str, int] = {}  # followers per followed session
        self._poller: asyncio.Task[None] | None = None

    @classmethod
    def from_url(cls, url: str) -> SqliteWorld:
        """``sqlite:///relative/path`` or ``sqlite:////absolute/path``, with optional
        ``?namespace=&synchronous=&busy_timeout=&max_entry_bytes=&mode=``."""
        base, params = split_query(url)
        parts = urlsplit(base)
        if parts.scheme.lower() != "sqlite":
            raise ConfigurationError(f"not a sqlite:// URL: {parts.scheme}://...")
        if parts.netloc:
            raise ConfigurationError(
                f"sqlite URL {mask(url)} has a host part; use sqlite:///relative/path "
                "or sqlite:////absolute/path"
            )
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if not path:
            raise ConfigurationError(
                "sqlite URL has no file path; e.g. sqlite:///.fxworld/world.db"
            )
        unknown = sorted(set(params) - set(_URL_PARAMS))
        if unknown:
            raise ConfigurationError(
                f"unknown sqlite URL parameter(s) {', '.join(unknown)}; "
                f"known: {', '.join(_URL_PARAMS)}"
            )
        options: dict[str, Any] = {}
        if "namespace" in params:
            options["namespace"] = params["namespace"]
        for name in ("synchronous", "mode"):
            if name in params:
                options[name] = params[name]
        if "busy_timeout" in params:
            options["busy_timeout"] = validate.seconds_option(
                "busy_timeout", params["busy_timeout"]
            )
        if "max_entry_bytes" in params:
            options["max_entry_bytes"] = validate.max_entry_bytes(params["max_entry_bytes"])
        return cls(path, **options)

    def __repr__(self) -> str:
        mode = f", mode={self.mode!r}" if self.mode != "rwc" else ""
        return (
            f"SqliteWorld({self.path!r}, namespace={self.namespace!r}, "
            f"synchronous={self.synchronous!r}{mode})"
        )

    # -- lifecycle -----------------------------------------------------------------

    async def setup(self) -> None:
        """Create the file, its directories and the schema (idempotent). With
        ``mode="rw"`` the file must exist; with ``mode="ro"`` it must hold the
        schema already."""
        await self._call("setting up", lambda conn: None)

    async def close(self) -> None:
        poller, self._poller = self._poller, None
        if poller is not None and not poller.done():
            poller.cancel()
        worker, self._worker = self._worker, None
        if worker is not None:
            try:
                await worker.submit(asyncio.get_running_loop(), self._disconnect)
            finally:
                worker.stop()
                if self._finalizer is not None:
                    self._finalizer.detach()
                    self._finalizer = None

    # -- append-with-fence ---------------------------------------------------------

    async def acquire(self, session_id: str) -> Fence:
        sid = validate.session_id(session_id)
        ns = self.namespace

        def run(conn: sqlite3.Connection) -> Fence:
            with write_transaction(conn):
                last, epoch = _session(conn, ns, sid)
                epoch += 1
                seq = last + 1
                fenced = json.dumps({"epoch": epoch})
                row = (ns, sid, seq, validate.FENCE_KIND, fenced, epoch, time.time())
                insert_entries(conn, [row])
                conn.execute(_UPSERT_SESSION, (ns, sid, seq, epoch))
            return Fence(sid, epoch, seq)

        fence = await self._call("acquiring a fence", run)
        self._bump(sid)
        return fence

    async def append(
        self,
        session_id: str,
        entries: Sequence[NewEntry],
        *,
        fence: Fence | None = None,
        expect: int | None = None,
        key: str | None = None,
        wake: float | None = None,
    ) -> int:
        sid, encoded = validate.append(
            session_id,
            entries,
            fence=fence,
            expect=expect,
            key=key,
            wake=wake,
            max_bytes=self.max_entry_bytes,
        )
        ns = self.namespace
        fence_epoch = fence.epoch if fence is not None else None
        delay = float(wake) if wake is not None else None

        def run(conn: sqlite3.Connection) -> tuple[int, bool]:
            with write_transaction(conn):
                if key is not None:
                    row = conn.execute(
                        "SELECT seq FROM fx_keys WHERE namespace = ? AND session_id = ?"
                        " AND key = ?",
                        (ns, sid, key),
                    ).fetchone()
                    if row is not None:
                        return int(row[0]), False
                last, epoch = _session(conn, ns, sid)
                if fence_epoch is not None and fence_epoch != epoch:
                    raise Fenced(sid, fence_epoch, epoch)
                if expect is not None and expect != last:
                    raise Conflict(sid, expect, last)
                now = time.time()
                insert_entries(
                    conn,
                    [
                        (ns, sid, last + i, kind, text, fence_epoch, now)
                        for i, (kind, text) in enumerate(encoded, start=1)
                    ],
                )
                seq = last + len(encoded)
                conn.execute(_UPSERT_SESSION, (ns, sid, seq, epoch))
                if key is not None:
                    conn.execute(
                        "INSERT INTO fx_keys (namespace, session_id, key, seq) VALUES (?, ?, ?, ?)",
                        (ns, sid, key, seq),
                    )
                if delay is not None:
                    conn.execute(_UPSERT_WAKE, (ns, sid, now + delay))
            return seq, True

        seq, wrote = await self._call("appending", run)
        if wrote:
            self._bump(sid)
        return seq

    # -- read-from-cursor ----------------------------------------------------------

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        sid = validate.session_id(session_id)
        validate.read_args(after, limit)
        ns = self.namespace

        def run(conn: sqlite3.Connection) -> list[Entry]:
            rows = conn.execute(
                f"{SELECT_ENTRIES} AND e.seq > ? ORDER BY e.seq LIMIT ?",
                (ns, sid, after, limit),
            ).fetchall()
            return [
                Entry(sid, seq, kind, jsondata.decode(data), epoch, datetime.fromtimestamp(at, UTC))
                for seq, kind, data, epoch, at in rows
            ]

        return await self._call("reading", run)

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Entry]:
        sid = validate.session_id(session_id)
        validate.read_args(after, 1)
        return self._follow(sid, after)

    async def _follow(self, sid: str, after: int) -> AsyncIterator[Entry]:
        cursor = after
        followers = self._generations
        followers.setdefault(sid, 0)
        self._following[sid] = self._following.get(sid, 0) + 1
        try:
            while True:
                seen = followers[sid]  # taken before the read: no change slips between
                batch = await self.read(sid, cursor)
                for entry in batch:
                    cursor = entry.seq
                    yield entry
                if not batch:
                    await self._changed_since(sid, seen, cursor, within=1.0)
        finally:
            left = self._following[sid] - 1
            if left:
                self._following[sid] = left
            else:
                del self._following[sid], followers[sid]

    # -- enqueue-wake --------------------------------------------------------------

    async def wake(self, session_id: str, *, delay: float = 0.0) -> None:
        sid = validate.session_id(session_id)
        seconds = validate.delay(delay)
        ns = self.namespace

        def run(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                conn.execute(_UPSERT_WAKE, (ns, sid, time.time() + seconds))

        await self._call("enqueueing a wake", run)

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        taken = await self._take(validate.lease(lease), 1)
        return taken[0] if taken else None

    async def take_wakes(self, *, lease: float, limit: int = 10) -> list[WakeLease]:
        """Up to ``limit`` due wakes, the earliest due, each leased as by
        ``take_wake`` (W11-W13 per wake): one transaction, one ``UPDATE``."""
        seconds = validate.lease(lease)
        return await self._take(seconds, validate.wake_batch(limit))

    async def _take(self, lease: float, limit: int) -> list[WakeLease]:
        ns = self.namespace

        def run(conn: sqlite3.Connection) -> list[WakeLease]:
            # A read first, so idle workers polling for wakes never take the write lock.
            if conn.execute(_ANY_DUE, (ns, time.time())).fetchone() is None:
                return []
            with write_transaction(conn):
                now = time.time()
                until = now + lease
                rows = conn.execute(_TAKE_DUE, (until, ns, ns, now, limit)).fetchall()
            return [WakeLease(str(s), str(t), int(n), _dt(until), a) for s, t, n, a in rows]

        return await self._call("taking wakes", run)

    async def renew_wake(self, wake: WakeLease, *, lease: float) -> WakeLease:
        seconds = validate.lease(lease)
        held = _lease_arg(wake)
        ns = self.namespace

        def run(conn: sqlite3.Connection) -> WakeLease:
            with write_transaction(conn):
                now = time.time()
                _held(conn, ns, held, now)
                until = now + seconds
                conn.execute(
                    "UPDATE fx_wakes SET lease_until = ? WHERE namespace = ? AND session_id = ?",
                    (until, ns, held.session_id),
                )
            return WakeLease(held.session_id, held.token, held.attempt, _dt(until), held.agent)

        return await self._call("renewing a lease", run)

    async def finish_wake(self, wake: WakeLease) -> None:
        held = _lease_arg(wake)
        ns = self.namespace

        def run(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                gen, taken_gen = _held(conn, ns, held, time.time())
                if gen == taken_gen:
                    conn.execute(
                        "DELETE FROM fx_wakes WHERE namespace = ? AND session_id = ?",
                        (ns, held.session_id),
                    )
                else:  # a wake() arrived while it ran: the session stays due
                    conn.execute(
                        "UPDATE fx_wakes SET token = NULL, lease_until = NULL, attempt = 0"
                        " WHERE namespace = ? AND session_id = ?",
                        (ns, held.session_id),
                    )

        await self._call("finishing a wake", run)

    # -- AgentRouter (W19): the owner of each session; each agent takes its own -----

    async def claim(self, session_id: str, agent: str) -> str:
        sid, name, ns = validate.session_id(session_id), validate.agent_name(agent), self.namespace
        return await self._call("claiming a session", lambda c: agents.claim(c, ns, sid, name))

    async def owner(self, session_id: str) -> str | None:
        sid, ns = validate.session_id(session_id), self.namespace
        return await self._call("reading an owner", lambda c: agents.owner(c, ns, sid))

    async def take_wakes_for(self, agent: str, *, lease: float, limit: int = 10) -> list[WakeLease]:
        """As :meth:`take_wakes`, of ``agent``'s sessions and nobody's: one ``UPDATE``."""
        name, seconds, count = (
            validate.agent_name(agent),
            validate.lease(lease),
            validate.wake_batch(limit),
        )
        ns = self.namespace

        def run(conn: sqlite3.Connection) -> list[WakeLease]:
            now = time.time()
            rows = agents.take_for(conn, ns, name, now, now + seconds, count)
            return [WakeLease(s, t, n, _dt(now + seconds), a) for s, t, n, a in rows]

        return await self._call("taking wakes", run)

    async def rename_agent(self, old: str, new: str) -> int:
        """Give every session of agent ``old`` to agent ``new``; how many moved."""
        was, now, ns = validate.agent_name(old), validate.agent_name(new), self.namespace
        return await self._call("renaming an agent", lambda c: agents.rename(c, ns, was, now))

    # -- lifecycle of a session ----------------------------------------------------

    async def delete(self, session_id: str) -> None:
        sid = validate.session_id(session_id)
        ns = self.namespace

        def run(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                _delete(conn, ns, sid)

        await self._call("deleting a session", run)
        self._bump(sid)

    async def drop_namespace(self) -> None:
        """Delete the namespace's rows from every table, in one write transaction
        (``fxworld.protocol.NamespaceDropper``). The file, with the other namespaces,
        stays; a missing file is left missing."""
        if not await asyncio.to_thread(os.path.isfile, self.path):
            return
        ns = self.namespace

        def run(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                for table in ("fx_entries", "fx_keys", "fx_wakes", "fx_sessions"):
                    conn.execute(f"DELETE FROM {table} WHERE namespace = ?", (ns,))

        await self._call("dropping the namespace", run)
        for sid in list(self._generations):
            self._bump(sid)

    async def last_entry(self, session_id: str) -> Entry | None:
        """The log's last entry, or ``None``: one indexed query
        (``fxworld.protocol.LastEntryReader``)."""
        sid = validate.session_id(session_id)
        ns = self.namespace

        def run(conn: sqlite3.Connection) -> Entry | None:
            row = conn.execute(
                f"{SELECT_ENTRIES} ORDER BY e.seq DESC LIMIT 1",
                (ns, sid),
            ).fetchone()
            if row is None:
                return None
            seq, kind, data, epoch, at = row
            return Entry(sid, seq, kind, json.loads(data), epoch, datetime.fromtimestamp(at, UTC))

        return await self._call("reading the last entry", run)

    async def delete_if_idle(self, session_id: str, *, last: int) -> bool:
        """``delete`` only if the log still ends at ``last`` and no wake is pending,
        in one write transaction (``fxworld.protocol.IdleDeleter``)."""
        sid = validate.session_id(session_id)
        last = validate.last_seq(last)
        ns = self.namespace

        def run(conn: sqlite3.Connection) -> bool:
            with write_transaction(conn):  # the write lock: no append nor wake() lands in between
                now_last, _ = _session(conn, ns, sid)
                waking = conn.execute(
                    "SELECT 1 FROM fx_wakes WHERE namespace = ? AND session_id = ?", (ns, sid)
                ).fetchone()
                if now_last != last or waking is not None:
                    return False
                _delete(conn, ns, sid)
                return True

        deleted = await self._call("deleting an idle session", run)
        if deleted:
            self._bump(sid)
        return deleted

    async def list_sessions(self, *, after: str = "", limit: int = 100) -> list[str]:
        """Ids of the sessions with a non-empty log, ascending, ``> after``."""
        validate.list_args(after, limit)
        ns = self.namespace

        def run(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(
                "SELECT session_id FROM fx_sessions WHERE namespace = ? AND last_seq > 0"
                " AND session_id > ? ORDER BY session_id LIMIT ?",
                (ns, after, limit),
            ).fetchall()
            return [str(r[0]) for r in rows]

        return await self._call("listing sessions", run)

    # -- WakeLister: read-only, takes nothing (W11-W13 untouched) ------------------

    async def wake_state(self, session_id: str) -> WakeState | None:
        sid = validate.session_id(session_id)
        found = await self._wake_rows(" AND session_id = ?", (sid,))
        return found[0] if found else None

    async def list_wakes(self, *, after: str = "", limit: int = 100) -> list[WakeState]:
        validate.list_args(after, limit)
        return await self._wake_rows(
            " AND session_id > ? ORDER BY session_id LIMIT ?", (after, limit)
        )

    async def _wake_rows(self, where: str, args: tuple[object, ...]) -> list[WakeState]:
        ns = self.namespace

        def run(conn: sqlite3.Connection) -> list[WakeState]:
            rows = conn.execute(_WAKE_STATE + where, (ns, *args)).fetchall()
            now = time.time()
            return [
                WakeState(str(sid), _dt(due), _dt(lease) if lease and lease > now else None, n)
                for sid, due, lease, n in rows
            ]

        return await self._call("listing wakes", run)

    # -- the worker thread ---------------------------------------------------------

    async def _call(self, doing: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._worker is None:
            self._worker = SqliteThread()
            # A world that is never closed still frees its thread and closes its
            # connection when collected or at exit (Python 3.13 warns of an
            # unclosed sqlite3 connection).
            self._finalizer = weakref.finalize(self, release, self._worker, self._held)
        return await self._worker.submit(asyncio.get_running_loop(), lambda: self._run(doing, fn))

    def _run(self, doing: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """In the worker thread: run ``fn`` with bounded retries on a busy database,
        translating every driver error (W16)."""
        attempt = 0
        while True:
            try:
                return fn(self._connect())
            except sqlite3.Error as e:
                self._rollback_quietly()
                if is_busy(e) and attempt < self.retries:
                    attempt += 1
                    time.sleep(random.uniform(0.0, 0.01 * 2**attempt))
                    continue
                raise translate(e, path=self.path, doing=doing) from None
            except OSError as e:
                raise translate_os(e, path=self.path, doing=doing) from None

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        if self.mode == "rwc":
            folder = Path(self.path).parent  # a default world's folder: never group-writable
            folder.mkdir(0o755 if folder.name == ".fxworld" else 0o777, parents=True, exist_ok=True)
        elif not os.path.isfile(self.path):
            raise ConfigurationError(
                f"sqlite world {self.path!r} does not exist (mode={self.mode} never creates "
                "one; `fxworld setup --world URL` does)"
            )
        conn = sqlite3.connect(
            f"file:{quote(os.path.abspath(self.path))}?mode={self.mode}",
            uri=True,
            timeout=self.busy_timeout,
            isolation_level=None,  # we issue BEGIN IMMEDIATE / COMMIT ourselves
            check_same_thread=False,  # one worker thread, but it may be replaced
            cached_statements=256,
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            wal = "" if self.mode == "ro" else " = WAL"  # read-only: as the file says
            journal = conn.execute(f"PRAGMA journal_mode{wal}").fetchone()[0]
            if str(journal).lower() != "wal":
                raise ConfigurationError(
                    f"sqlite world {self.path!r}: cannot use WAL mode (journal mode is {journal})"
                )
            if self.mode != "ro":
                conn.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
            migrate(conn, self.path, read_only=self.mode == "ro")
            self._data_version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._held[:] = [conn]
        return conn

    def _rollback_quietly(self) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            # The connection is in an unknown state: drop it, the next call reconnects.
            self._conn = None
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    # -- change notification for follow() ------------------------------------------

    def _bump(self, sid: str) -> None:
        """Session ``sid`` may have changed: wake its followers waiting for a change."""
        if sid not in self._generations:
            return  # nobody follows it
        self._generations[sid] += 1
        for _, fut in self._waiters.pop(sid, ()):
            loop = fut.get_loop()
            if loop.is_closed():
                continue
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if loop is running:
                _resolve(fut)
            else:
                loop.call_soon_threadsafe(_resolve, fut)

    async def _changed_since(self, sid: str, seen: int, cursor: int, *, within: float) -> None:
        if self._generations[sid] != seen:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        waiter = (cursor, fut)
        self._waiters.setdefault(sid, []).append(waiter)
        if self._poller is None or self._poller.done() or self._poller.get_loop() is not loop:
            self._poller = loop.create_task(self._poll())
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancel that
        # arrives as the change fires, and the follower would then never stop.
        try:
            async with asyncio.timeout(within):
                await fut
        except TimeoutError:
            pass
        finally:
            waiting = self._waiters.get(sid)
            if waiting is not None and waiter in waiting:
                waiting.remove(waiter)
                if not waiting:
                    del self._waiters[sid]

    async def _poll(self) -> None:
        """While someone waits for a change, check ``PRAGMA data_version`` (it moves
        when another connection, in any process, commits); when it moved, wake the
        followers whose session grew past their cursor."""
        while self._waiters:
            await asyncio.sleep(self.poll_interval)
            try:
                version = await self._call("polling for changes", _data_version)
                if version == self._data_version:
                    continue
                lasts = await self._last_seqs(list(self._waiters))
            except Exception:  # a transient error: followers retry on their own
                continue
            self._data_version = version
            for sid, count in list(self._following.items()):
                waiting = self._waiters.get(sid, [])
                # a follower between its read and its wait re-reads (the commit may
                # have come after its read); a waiting one only if its session grew
                if len(waiting) < count or any(lasts.get(sid, 0) > c for c, _ in waiting):
                    self._bump(sid)

    async def _last_seqs(self, sids: list[str]) -> dict[str, int]:
        """The last seq of each of ``sids`` that has a log: one query."""
        ns = self.namespace

        def run(conn: sqlite3.Connection) -> dict[str, int]:
            rows = conn.execute(
                "SELECT session_id, last_seq FROM fx_sessions WHERE namespace = ?"
                " AND session_id IN (SELECT value FROM json_each(?))",
                (ns, json.dumps(sids)),
            )
            return {str(sid): int(last) for sid, last in rows}

        return await self._call("polling for changes", run)


# -- helpers run in the worker thread ------------------------------------------------


def _session(conn: sqlite3.Connection, ns: str, sid: str) -> tuple[int, int]:
    row = conn.execute(
        "SELECT last_seq, epoch FROM fx_sessions WHERE namespace = ? AND session_id = ?",
        (ns, sid),
    ).fetchone()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def _delete(conn: sqlite3.Connection, ns: str, sid: str) -> None:
    """W14, inside the caller's write transaction: the log, its keys and its wake go."""
    for table in ("fx_entries", "fx_keys", "fx_wakes"):
        conn.execute(f"DELETE FROM {table} WHERE namespace = ? AND session_id = ?", (ns, sid))
    # Burn an epoch so that every fence acquired before is refused (W14).
    conn.execute(
        "UPDATE fx_sessions SET last_seq = 0, epoch = epoch + 1, agent = NULL"
        " WHERE namespace = ? AND session_id = ?",
        (ns, sid),
    )


def _held(conn: sqlite3.Connection, ns: str, wake: WakeLease, now: float) -> tuple[int, int]:
    """``(gen, taken_gen)`` of the wake if ``wake`` is its current, unexpired lease;
    else ``LeaseLost``."""
    row = conn.execute(
        "SELECT token, lease_until, gen, taken_gen FROM fx_wakes"
        " WHERE namespace = ? AND session_id = ?",
        (ns, wake.session_id),
    ).fetchone()
    if row is None or row[0] != wake.token or row[1] is None or row[1] <= now:
        raise LeaseLost(
            f"session {wake.session_id!r}: the lease {wake.token[:8]} is no longer held"
        )
    return int(row[2]), int(row[3])


def _data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def _lease_arg(wake: object) -> WakeLease:
    return validate.held(wake)  # W15: before any I/O


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)
