"""The PostgreSQL schema of one namespace, as numbered idempotent migrations.

Every namespace is its own Postgres schema, ``fxworld_<namespace>``, holding:

``sessions``  one row per session ever used: the newest ``epoch`` handed out (or burnt
              by a delete) and the ``last_seq`` of its log. Every write to a session
              locks this row first, so appends of one session are serialised and a
              seq is allocated under the fence check, in the same transaction that
              inserts the entries: a reader never sees seq n+1 before seq n (W9).
``entries``   the logs, keyed ``(session_id, seq)``; data in ``jsonb`` (``raw`` holds
              the JSON text instead for the rare data jsonb refuses: ``\\u0000``).
``keys``      idempotency keys (bytea: a key may hold any character) -> last seq.
``wakes``     at most one row per session (W11): ``due``, ``lease_until``, ``gen``
              (bumped by every wake request), ``taken_gen``, ``attempt``, ``token``;
              ``ready_at`` = ``coalesce(lease_until, due)`` is when it can be taken.
``follows``   sessions some process follows right now, with the listener's backend
              pid; a trigger keeps ``sessions.followers`` counting them, and an append
              (``fx_append_quiet``) returns whether its session row says someone
              follows; the writing process then sends one NOTIFY for all its
              followed appends of the last moment, on a connection of its own (a
              NOTIFY in an append's commit serialises commits server-wide).
``migrations`` the versions applied.

The hot path runs as plpgsql functions (``fx_append_quiet``, ``fx_acquire``,
``fx_take_wakes``, ``fx_finish_wake``, ...): one statement, one round trip. Refusals
raise custom SQLSTATEs (``FX001`` fenced, ``FX002`` conflict, ``FX003`` lease lost)
so the whole call rolls back and nothing is written; ``_errors`` turns them into
fxworld errors.

:func:`migrate` applies what is missing under a transaction-scoped advisory lock, so
any number of processes may run ``setup()`` at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from fxworld.errors import ConfigurationError

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "channel_name",
    "drop",
    "migrate",
    "migration_sql",
    "schema_name",
]

FENCED = "FX001"
CONFLICT = "FX002"
LEASE_LOST = "FX003"


def schema_name(namespace: str) -> str:
    """The Postgres schema of ``namespace`` (already validated: ``[A-Za-z0-9_-]{1,48}``,
    so quoting it is enough)."""
    return f"fxworld_{namespace}"


def channel_name(namespace: str) -> str:
    """The LISTEN/NOTIFY channel of ``namespace``."""
    return f"fxworld_{namespace}"


def qualified(namespace: str) -> str:
    """The quoted schema name, for SQL text."""
    return '"' + schema_name(namespace) + '"'


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]  # templates: {s} = quoted schema, {channel} = NOTIFY channel


_V1_TABLES = (
    # no index beyond the key, and room in each page: the append's update stays HOT
    """CREATE TABLE IF NOT EXISTS {s}.sessions (
        session_id text COLLATE "C" PRIMARY KEY,
        epoch bigint NOT NULL DEFAULT 0,
        last_seq bigint NOT NULL DEFAULT 0,
        followers integer NOT NULL DEFAULT 0
    ) WITH (fillfactor = 50)""",
    """CREATE TABLE IF NOT EXISTS {s}.entries (
        session_id text NOT NULL,
        seq bigint NOT NULL,
        kind text NOT NULL,
        data jsonb,
        raw text,
        epoch bigint,
        at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (session_id, seq),
        CHECK ((data IS NULL) <> (raw IS NULL))
    )""",
    """CREATE TABLE IF NOT EXISTS {s}.keys (
        session_id text NOT NULL,
        key bytea NOT NULL,
        seq bigint NOT NULL,
        PRIMARY KEY (session_id, key)
    )""",
    """CREATE TABLE IF NOT EXISTS {s}.wakes (
        session_id text PRIMARY KEY,
        due timestamptz,
        lease_until timestamptz,
        ready_at timestamptz GENERATED ALWAYS AS (coalesce(lease_until, due)) STORED,
        gen bigint NOT NULL DEFAULT 1,
        taken_gen bigint NOT NULL DEFAULT 0,
        attempt integer NOT NULL DEFAULT 0,
        token text
    )""",
    """CREATE INDEX IF NOT EXISTS wakes_ready ON {s}.wakes (ready_at)
        WHERE ready_at IS NOT NULL""",
    """CREATE TABLE IF NOT EXISTS {s}.follows (
        session_id text NOT NULL,
        pid integer NOT NULL,
        PRIMARY KEY (session_id, pid)
    )""",
    # sessions.followers counts the follows rows, so an append learns from the row it
    # updates anyway whether to NOTIFY (a counter: concurrent changes cannot lose one)
    """CREATE OR REPLACE FUNCTION {s}.fx_follows_count() RETURNS trigger
    LANGUAGE plpgsql AS $fx$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO {s}.sessions AS t (session_id, followers) VALUES (NEW.session_id, 1)
                ON CONFLICT (session_id) DO UPDATE SET followers = t.followers + 1;
        ELSE
            UPDATE {s}.sessions SET followers = greatest(followers - 1, 0)
                WHERE session_id = OLD.session_id;
        END IF;
        RETURN NULL;
    END
    $fx$""",
    """CREATE OR REPLACE TRIGGER follows_count AFTER INSERT OR DELETE ON {s}.follows
        FOR EACH ROW EXECUTE FUNCTION {s}.fx_follows_count()""",
)

_V1_FUNCTIONS = (
    # -- a wake request: coalesce with a pending one, keep the earlier due (W11)
    # (plpgsql, not sql: plpgsql caches its plans, a sql function is planned per call)
    """CREATE OR REPLACE FUNCTION {s}.fx_wake(p_sid text, p_delay double precision)
    RETURNS void LANGUAGE plpgsql AS $fx$
    BEGIN
        INSERT INTO {s}.wakes AS w (session_id, due)
        VALUES (p_sid, now() + make_interval(secs => p_delay))
        ON CONFLICT (session_id) DO UPDATE
            SET gen = w.gen + 1, due = least(w.due, EXCLUDED.due);
    END
    $fx$""",
    # -- lock (creating if needed) the session row; returns (epoch, last_seq)
    """CREATE OR REPLACE FUNCTION {s}.fx_lock(p_sid text, OUT l_epoch bigint, OUT l_last bigint)
    LANGUAGE plpgsql AS $fx$
    BEGIN
        SELECT epoch, last_seq INTO l_epoch, l_last
            FROM {s}.sessions WHERE session_id = p_sid FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO {s}.sessions (session_id) VALUES (p_sid) ON CONFLICT DO NOTHING;
            SELECT epoch, last_seq INTO l_epoch, l_last
                FROM {s}.sessions WHERE session_id = p_sid FOR UPDATE;
        END IF;
    END
    $fx$""",
    # -- tell followers, only when somebody follows this session
    """CREATE OR REPLACE FUNCTION {s}.fx_changed(p_sid text) RETURNS void
    LANGUAGE plpgsql AS $fx$
    BEGIN
        IF EXISTS (SELECT 1 FROM {s}.sessions WHERE session_id = p_sid AND followers > 0) THEN
            PERFORM pg_notify('{channel}', p_sid);
        END IF;
    END
    $fx$""",
    # -- acquire (W1): a new, greater epoch and its fence entry; returns (epoch, seq)
    """CREATE OR REPLACE FUNCTION {s}.fx_acquire(
        p_sid text, OUT o_epoch bigint, OUT o_seq bigint)
    LANGUAGE plpgsql AS $fx$
    DECLARE
        v_epoch bigint; v_last bigint;
    BEGIN
        SELECT l_epoch, l_last INTO v_epoch, v_last FROM {s}.fx_lock(p_sid);
        o_epoch := v_epoch + 1;
        o_seq := v_last + 1;
        INSERT INTO {s}.entries (session_id, seq, kind, data, epoch)
            VALUES (p_sid, o_seq, 'fence', jsonb_build_object('epoch', o_epoch), o_epoch);
        UPDATE {s}.sessions SET epoch = o_epoch, last_seq = o_seq WHERE session_id = p_sid;
        PERFORM {s}.fx_changed(p_sid);
    END
    $fx$""",
    # -- delete (W14): drop log, keys, wake; burn an epoch so old fences are refused
    """CREATE OR REPLACE FUNCTION {s}.fx_delete(p_sid text) RETURNS void
    LANGUAGE plpgsql AS $fx$
    BEGIN
        UPDATE {s}.sessions SET epoch = epoch + 1, last_seq = 0 WHERE session_id = p_sid;
        IF FOUND THEN
            DELETE FROM {s}.entries WHERE session_id = p_sid;
            DELETE FROM {s}.keys WHERE session_id = p_sid;
            PERFORM {s}.fx_changed(p_sid);
        END IF;
        DELETE FROM {s}.wakes WHERE session_id = p_sid;
    END
    $fx$""",
    # -- take up to p_limit due wakes under a lease (W12), skipping rows others hold
    """CREATE OR REPLACE FUNCTION {s}.fx_take_wakes(p_lease double precision, p_limit integer)
    RETURNS TABLE (session_id text, token text, attempt integer, expires_at timestamptz)
    LANGUAGE plpgsql AS $fx$
    BEGIN
        RETURN QUERY WITH ready AS (
            SELECT w.session_id FROM {s}.wakes w
            WHERE w.ready_at <= now()
            ORDER BY w.ready_at
            LIMIT p_limit
            FOR UPDATE SKIP LOCKED
        )
        UPDATE {s}.wakes w
            SET attempt = w.attempt + 1,
                token = gen_random_uuid()::text,
                lease_until = now() + make_interval(secs => p_lease),
                taken_gen = w.gen,
                due = NULL
        FROM ready WHERE w.session_id = ready.session_id
        RETURNING w.session_id, w.token, w.attempt, w.lease_until;
    END
    $fx$""",
    # -- renew a held lease (W12)
    """CREATE OR REPLACE FUNCTION {s}.fx_renew_wake(
        p_sid text, p_token text, p_lease double precision)
    RETURNS timestamptz LANGUAGE plpgsql AS $fx$
    DECLARE
        v_until timestamptz;
    BEGIN
        UPDATE {s}.wakes SET lease_until = now() + make_interval(secs => p_lease)
            WHERE session_id = p_sid AND token = p_token AND lease_until > now()
            RETURNING lease_until INTO v_until;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'FX003', MESSAGE = 'lease lost';
        END IF;
        RETURN v_until;
    END
    $fx$""",
    # -- finish (W13): delete unless a wake() arrived since the take
    """CREATE OR REPLACE FUNCTION {s}.fx_finish_wake(p_sid text, p_token text) RETURNS void
    LANGUAGE plpgsql AS $fx$
    DECLARE
        v_gen bigint; v_taken bigint;
    BEGIN
        SELECT gen, taken_gen INTO v_gen, v_taken FROM {s}.wakes
            WHERE session_id = p_sid AND token = p_token AND lease_until > now()
            FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'FX003', MESSAGE = 'lease lost';
        END IF;
        IF v_gen = v_taken THEN
            DELETE FROM {s}.wakes WHERE session_id = p_sid;
        ELSE
            UPDATE {s}.wakes SET token = NULL, lease_until = NULL, attempt = 0
                WHERE session_id = p_sid;
        END IF;
    END
    $fx$""",
)

_V2_FUNCTIONS = (
    # -- append (W2-W7), the one body of the append: key first, then fence, then
    # expect; returns the last seq. The first statement locks the session row and
    # reserves the positions at once; a refusal raises, which rolls the reservation
    # back with everything else (W4: all or nothing). It sends no NOTIFY: it says
    # whether the session is followed, and the writer sends one NOTIFY for many
    # appends on a connection of its own (a NOTIFY in the append's commit
    # serialises commits).
    """CREATE OR REPLACE FUNCTION {s}.fx_append_quiet(
        p_sid text, p_kinds text[], p_datas text[], p_raws text[],
        p_epoch bigint, p_expect bigint, p_key bytea, p_wake double precision,
        OUT o_seq bigint, OUT o_followed boolean)
    LANGUAGE plpgsql AS $fx$
    DECLARE
        v_n integer := cardinality(p_kinds);
        v_epoch bigint; v_last bigint; v_followers integer;
    BEGIN
        UPDATE {s}.sessions SET last_seq = last_seq + v_n WHERE session_id = p_sid
            RETURNING epoch, last_seq - v_n, followers INTO v_epoch, v_last, v_followers;
        IF NOT FOUND THEN
            INSERT INTO {s}.sessions AS t (session_id, last_seq) VALUES (p_sid, v_n)
                ON CONFLICT (session_id) DO UPDATE SET last_seq = t.last_seq + v_n
                RETURNING t.epoch, t.last_seq - v_n, t.followers
                INTO v_epoch, v_last, v_followers;
        END IF;
        o_followed := v_followers > 0;
        IF p_key IS NOT NULL THEN
            SELECT seq INTO o_seq FROM {s}.keys WHERE session_id = p_sid AND key = p_key;
            IF FOUND THEN
                UPDATE {s}.sessions SET last_seq = v_last WHERE session_id = p_sid;
                o_followed := false;
                RETURN;
            END IF;
        END IF;
        IF p_epoch IS NOT NULL AND p_epoch <> v_epoch THEN
            RAISE EXCEPTION USING ERRCODE = 'FX001', MESSAGE = 'fenced', DETAIL = v_epoch::text;
        END IF;
        IF p_expect IS NOT NULL AND p_expect <> v_last THEN
            RAISE EXCEPTION USING ERRCODE = 'FX002', MESSAGE = 'conflict', DETAIL = v_last::text;
        END IF;
        o_seq := v_last + v_n;
        IF v_n = 1 THEN
            INSERT INTO {s}.entries (session_id, seq, kind, data, raw, epoch)
                VALUES (p_sid, o_seq, p_kinds[1], p_datas[1]::jsonb, p_raws[1], p_epoch);
        ELSE
            INSERT INTO {s}.entries (session_id, seq, kind, data, raw, epoch)
                SELECT p_sid, v_last + i, p_kinds[i], p_datas[i]::jsonb, p_raws[i], p_epoch
                FROM generate_series(1, v_n) AS i;
        END IF;
        IF p_key IS NOT NULL THEN
            INSERT INTO {s}.keys (session_id, key, seq) VALUES (p_sid, p_key, o_seq);
        END IF;
        IF p_wake IS NOT NULL THEN
            PERFORM {s}.fx_wake(p_sid, p_wake);
        END IF;
    END
    $fx$""",
)

_V3_FUNCTIONS = (
    # -- fx_append (migration 1 carried a copy of the whole append): fx_append_quiet
    # and a NOTIFY in the caller's commit, for callers that do not coalesce them
    """CREATE OR REPLACE FUNCTION {s}.fx_append(
        p_sid text, p_kinds text[], p_datas text[], p_raws text[],
        p_epoch bigint, p_expect bigint, p_key bytea, p_wake double precision)
    RETURNS bigint LANGUAGE plpgsql AS $fx$
    DECLARE
        v_seq bigint; v_followed boolean;
    BEGIN
        SELECT o_seq, o_followed INTO v_seq, v_followed
            FROM {s}.fx_append_quiet(p_sid, p_kinds, p_datas, p_raws,
                                     p_epoch, p_expect, p_key, p_wake);
        IF v_followed THEN
            PERFORM pg_notify('{channel}', p_sid);
        END IF;
        RETURN v_seq;
    END
    $fx$""",
)

_V4_AGENTS = (
    # -- agent routing (W19): each session's owner, copied to its wake and indexed by
    # owner, so an agent's take reads its own wakes and nobody's, never another's.
    # A namespace written before has no owners: the first agent that prompts or runs
    # a session claims it. No index on sessions.agent: the append's update stays HOT.
    "ALTER TABLE {s}.sessions ADD COLUMN IF NOT EXISTS agent text",
    "ALTER TABLE {s}.wakes ADD COLUMN IF NOT EXISTS agent text",
    """CREATE INDEX IF NOT EXISTS wakes_agent_ready ON {s}.wakes (agent, ready_at)
        WHERE ready_at IS NOT NULL""",
    # a new wake row starts with its session's owner (a pending one keeps its own)
    """CREATE OR REPLACE FUNCTION {s}.fx_wake(p_sid text, p_delay double precision)
    RETURNS void LANGUAGE plpgsql AS $fx$
    BEGIN
        INSERT INTO {s}.wakes AS w (session_id, due, agent)
        VALUES (p_sid, now() + make_interval(secs => p_delay),
                (SELECT s.agent FROM {s}.sessions s WHERE s.session_id = p_sid))
        ON CONFLICT (session_id) DO UPDATE
            SET gen = w.gen + 1, due = least(w.due, EXCLUDED.due);
    END
    $fx$""",
    # delete (W14) forgets the owner with the log
    """CREATE OR REPLACE FUNCTION {s}.fx_delete(p_sid text) RETURNS void
    LANGUAGE plpgsql AS $fx$
    BEGIN
        UPDATE {s}.sessions SET epoch = epoch + 1, last_seq = 0, agent = NULL
            WHERE session_id = p_sid;
        IF FOUND THEN
            DELETE FROM {s}.entries WHERE session_id = p_sid;
            DELETE FROM {s}.keys WHERE session_id = p_sid;
            PERFORM {s}.fx_changed(p_sid);
        END IF;
        DELETE FROM {s}.wakes WHERE session_id = p_sid;
    END
    $fx$""",
    # claim: set-if-absent under the session row's lock; returns the owner now
    """CREATE OR REPLACE FUNCTION {s}.fx_claim(p_sid text, p_agent text) RETURNS text
    LANGUAGE plpgsql AS $fx$
    DECLARE
        v_owner text;
    BEGIN
        SELECT agent INTO v_owner FROM {s}.sessions WHERE session_id = p_sid;
        IF v_owner IS NOT NULL THEN
            RETURN v_owner;
        END IF;
        INSERT INTO {s}.sessions AS t (session_id, agent) VALUES (p_sid, p_agent)
            ON CONFLICT (session_id) DO UPDATE SET agent = coalesce(t.agent, EXCLUDED.agent)
            RETURNING t.agent INTO v_owner;
        UPDATE {s}.wakes SET agent = v_owner
            WHERE session_id = p_sid AND agent IS DISTINCT FROM v_owner;
        RETURN v_owner;
    END
    $fx$""",
    # an agent's take: the earliest ready of its own wakes and of nobody's, each by
    # the index; a taken wake's owner is read again from its session (a wake made
    # while its session was being claimed is put right here)
    """CREATE OR REPLACE FUNCTION {s}.fx_take_wakes_for(
        p_agent text, p_lease double precision, p_limit integer)
    RETURNS TABLE (session_id text, token text, attempt integer, expires_at timestamptz,
                   agent text)
    LANGUAGE plpgsql AS $fx$
    BEGIN
        RETURN QUERY WITH mine AS (
            SELECT w.session_id, w.ready_at FROM {s}.wakes w
            WHERE w.agent = p_agent AND w.ready_at <= now()
            ORDER BY w.ready_at LIMIT p_limit
            FOR UPDATE SKIP LOCKED
        ), nobodys AS (
            SELECT w.session_id, w.ready_at FROM {s}.wakes w
            WHERE w.agent IS NULL AND w.ready_at <= now()
            ORDER BY w.ready_at LIMIT p_limit
            FOR UPDATE SKIP LOCKED
        ), chosen AS (
            SELECT r.session_id FROM (SELECT * FROM mine UNION ALL SELECT * FROM nobodys) r
            ORDER BY r.ready_at LIMIT p_limit
        )
        UPDATE {s}.wakes w
            SET attempt = w.attempt + 1,
                token = gen_random_uuid()::text,
                lease_until = now() + make_interval(secs => p_lease),
                taken_gen = w.gen,
                due = NULL,
                agent = (SELECT s.agent FROM {s}.sessions s WHERE s.session_id = w.session_id)
        FROM chosen WHERE w.session_id = chosen.session_id
        RETURNING w.session_id, w.token, w.attempt, w.lease_until, w.agent;
    END
    $fx$""",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "tables and hot-path functions", _V1_TABLES + _V1_FUNCTIONS),
    Migration(2, "fx_append_quiet: the writer coalesces NOTIFYs", _V2_FUNCTIONS),
    Migration(3, "fx_append calls fx_append_quiet: one body of the append", _V3_FUNCTIONS),
    Migration(4, "agent routing: the owner of each session and its wake", _V4_AGENTS),
)
SCHEMA_VERSION = MIGRATIONS[-1].version


def migration_sql(migration: Migration, namespace: str) -> list[str]:
    """The statements of ``migration`` for ``namespace``, ready to execute."""
    s = qualified(namespace)
    channel = channel_name(namespace)
    return [stmt.replace("{s}", s).replace("{channel}", channel) for stmt in migration.statements]


def lock_key(namespace: str) -> str:
    """The text whose ``hashtext`` is the advisory-lock key of ``namespace``'s migrations."""
    return f"fxworld.migrate:{namespace}"


DROP_LOCK_TIMEOUT = "10s"
"""How long :func:`drop` waits for each lock that a transaction of another
connection holds (a ``setup()``, one of the namespace's tables) before it gives up
(SQLSTATE 55P03)."""


async def drop(conn: AsyncConnection, namespace: str) -> None:
    """Drop ``namespace``'s schema and everything in it (tables, functions, trigger)
    in the caller's transaction, under the migrations' advisory lock, so that a
    ``setup()`` of it in flight ends first. Nothing else holds per-namespace state:
    the NOTIFY channel is not stored."""
    await conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{DROP_LOCK_TIMEOUT}'")
    await conn.execute(
        text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": lock_key(namespace)}
    )
    await conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {qualified(namespace)} CASCADE")


async def migrate(conn: AsyncConnection, namespace: str) -> None:
    """Apply the missing migrations of ``namespace`` in the caller's transaction."""
    s = qualified(namespace)
    await conn.execute(
        text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": lock_key(namespace)}
    )
    await conn.exec_driver_sql(f"CREATE SCHEMA IF NOT EXISTS {s}")
    await conn.exec_driver_sql(
        f"CREATE TABLE IF NOT EXISTS {s}.migrations (version integer PRIMARY KEY, "
        "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    result = await conn.exec_driver_sql(f"SELECT coalesce(max(version), 0) FROM {s}.migrations")
    current = int(result.scalar_one())
    if current > SCHEMA_VERSION:
        raise ConfigurationError(
            f"namespace {namespace!r} is at schema version {current}, newer than this "
            f"fxworld knows ({SCHEMA_VERSION}): upgrade fxworld"
        )
    for migration in MIGRATIONS:
        if migration.version <= current:
            continue
        for statement in migration_sql(migration, namespace):
            await conn.exec_driver_sql(statement)
        await conn.execute(
            text(f"INSERT INTO {s}.migrations (version, description) VALUES (:v, :d)"),
            {"v": migration.version, "d": migration.description},
        )
