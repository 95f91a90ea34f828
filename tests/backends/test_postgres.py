"""PostgresWorld on a real PostgreSQL server: every guarantee W1-W19, then what is
particular to PostgreSQL (round trips, connection cuts, crash-restart, NOTIFY,
namespaces, the application's engine, concurrent migrations, untouched data)."""

from __future__ import annotations

import asyncio
import struct
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from fxworld import Fence, NewEntry, WakeLease, open_world
from fxworld.errors import (
    BackendUnavailable,
    ConfigurationError,
    Conflict,
    Fenced,
    InvalidArgument,
    InvalidEntry,
    InvalidSessionId,
    LeaseLost,
)
from fxworld_conformance import Target, WorldSuite
from fxworld_conformance.runner import run_check
from fxworld_conformance.suite import assert_results
from fxworld_postgres import PostgresWorld
from fxworld_postgres._schema import MIGRATIONS
from tests.support.counting_proxy import CountingProxy
from tests.support.namespaces import fresh_namespace
from tests.support.postgres_server import PostgresServer
from tests.support.waiting import wait_until, wait_until_async


class TestPostgresWorld(WorldSuite):
    """The whole kit (directed checks, state machines, the process tier with
    SIGKILL and SIGSTOP, zombie writers, cut and stalled connections and a server
    crash-restart) and the example tests of every guarantee. PostgreSQL can do all
    of it, so no row of the process tier may be skipped here."""

    @pytest.fixture
    def fxworld_target(self, postgres_server: PostgresServer) -> Target:
        return Target(
            url=postgres_server.url,
            restart=postgres_server.acrash_restart,
            extra_capabilities=frozenset({"restartable"}),
        )

    @pytest.mark.fxworld_slow
    def test_processes(
        self, fxworld_target: Target, fxworld_profile: str, fxworld_seed: int
    ) -> None:
        rows = run_check("processes", fxworld_target, profile=fxworld_profile, seed=fxworld_seed)
        assert_results(rows)
        skipped = {r.name: r.detail for r in rows if r.status == "skipped"}
        assert not skipped, skipped
        main = next(r for r in rows if r.extra.get("mode"))
        assert main.extra["mode"] == "processes"
        faults = main.extra.get("faults", {})
        assert faults.get("kill_inside", 0) + faults.get("stop_inside", 0) >= 1, faults
        assert faults.get("cut", 0) >= 1, faults


# -- helpers -----------------------------------------------------------------------------


def _url(server: PostgresServer, namespace: str, **params: object) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"namespace": namespace, **params}.items())
    return f"{server.url}?{query}"


@pytest.fixture
async def pg(postgres_server: PostgresServer) -> AsyncIterator[PostgresWorld]:
    w = PostgresWorld(postgres_server.url, namespace=fresh_namespace())
    await w.setup()
    yield w
    await w.close()


async def _admin(server: PostgresServer) -> asyncpg.Connection:
    return await asyncpg.connect(
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password or None,
        database=server.database,
    )


async def _followed(server: PostgresServer, namespace: str, sids: list[str]) -> None:
    """Return once every session of ``sids`` has a row in ``follows``: its follower
    registered, so an append to it notifies (bounded: 20 s)."""
    conn = await _admin(server)
    query = (
        f'SELECT count(DISTINCT session_id) FROM "fxworld_{namespace}".follows'
        " WHERE session_id = ANY($1::text[])"
    )

    async def registered() -> bool:
        return bool(await conn.fetchval(query, sids) == len(sids))

    try:
        await wait_until_async(registered, 20)
    finally:
        await conn.close()


async def _snapshot(server: PostgresServer, namespace: str) -> dict[str, str]:
    """Every row of every table of ``namespace``, hashed: equal iff nothing changed."""
    conn = await _admin(server)
    try:
        out = {}
        for table in ("sessions", "entries", "keys", "wakes"):
            out[table] = await conn.fetchval(
                f"SELECT coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '') "
                f'FROM "fxworld_{namespace}".{table} t'
            )
        return out
    finally:
        await conn.close()


class RoundTripCounter(CountingProxy):
    """Counts the client's round trips: each simple ``Query`` or extended-protocol
    ``Sync`` message is one."""

    def __init__(self, server: PostgresServer) -> None:
        super().__init__(server.host, server.port)
        self.server = server

    @property
    def round_trips(self) -> int:
        return self.count

    def url(self, namespace: str) -> str:
        s = self.server
        auth = f"{s.user}:{s.password}" if s.password else s.user
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{s.database}?namespace={namespace}"

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        started = False
        while True:
            if not started:  # SSLRequest / StartupMessage: no type byte
                head = await reader.readexactly(8)
                (length, code) = struct.unpack("!ii", head)
                body = await reader.readexactly(length - 8)
                started = code == 196608
                writer.write(head + body)
            else:
                kind = await reader.readexactly(1)
                (length,) = struct.unpack("!i", await reader.readexactly(4))
                body = await reader.readexactly(length - 4)
                if kind in (b"Q", b"S"):
                    self.count += 1
                writer.write(kind + struct.pack("!i", length) + body)
            await writer.drain()


# -- PostgreSQL specifics --------------------------------------------------------------


async def test_hot_path_calls_are_one_round_trip_each(postgres_server: PostgresServer) -> None:
    ns = fresh_namespace()
    async with RoundTripCounter(postgres_server) as proxy:
        w = PostgresWorld.from_url(proxy.url(ns) + "&pool_size=1")
        await w.setup()
        try:

            async def once() -> dict[str, int]:
                counts = {}

                async def count(name: str, call: Awaitable[object]) -> object:
                    before = proxy.round_trips
                    result = await call
                    counts[name] = proxy.round_trips - before
                    return result

                f = await count("acquire", w.acquire("s"))
                assert isinstance(f, Fence)
                await count("append", w.append("s", [NewEntry("a", {"x": 1})] * 3, fence=f))
                await count(
                    "append+key+wake",
                    w.append("s", [NewEntry("p", {})], key=uuid.uuid4().hex, wake=0),
                )
                lease = await count("take_wake", w.take_wake(lease=30))
                assert isinstance(lease, WakeLease)
                lease = await count("renew_wake", w.renew_wake(lease, lease=30))
                assert isinstance(lease, WakeLease)
                await count("finish_wake", w.finish_wake(lease))
                await count("wake", w.wake("s"))
                await count("read", w.read("s"))
                return counts

            await once()  # the first call of each statement also prepares it
            counts = await once()
            assert counts == dict.fromkeys(counts, 1), counts
        finally:
            await w.close()


async def test_concurrent_writers_on_two_engines_keep_the_log_dense_and_monotone(
    postgres_server: PostgresServer,
) -> None:
    ns = fresh_namespace()
    worlds = [PostgresWorld(postgres_server.url, namespace=ns, pool_size=4) for _ in range(2)]
    await worlds[0].setup()
    acked: dict[int, dict[str, object]] = {}  # seq -> data of the last entry of that call
    reads_ok = True

    async def writer(w: PostgresWorld, name: str) -> None:
        for i in range(12):
            if i % 3 == 0:
                fence = await w.acquire("s")
            batch = [NewEntry("step", {"w": name, "i": i, "j": j}) for j in range(2)]
            try:
                acked[await w.append("s", batch, fence=fence)] = batch[-1].data
            except Fenced:
                pass
            prompt = NewEntry("prompt", {"w": name, "i": i})
            acked[await w.append("s", [prompt])] = prompt.data

    async def reader(w: PostgresWorld) -> None:
        nonlocal reads_ok
        seen = 0
        for _ in range(40):
            got = await w.read("s")
            seqs = [e.seq for e in got]
            reads_ok &= seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= seen
            seen = len(seqs)
            await asyncio.sleep(0.005)

    try:
        await asyncio.gather(*(writer(worlds[k % 2], f"w{k}") for k in range(8)), reader(worlds[1]))
        log = await worlds[0].read("s", limit=10_000)
        assert [e.seq for e in log] == list(range(1, len(log) + 1))
        epochs = [e.epoch for e in log if e.epoch is not None]
        assert epochs == sorted(epochs)
        for seq, data in acked.items():
            assert log[seq - 1].data == data
        steps = [e for e in log if e.kind == "step"]
        for first, second in zip(steps[::2], steps[1::2], strict=True):  # batches atomic
            assert (first.data["j"], second.data["j"]) == (0, 1)
            assert first.seq + 1 == second.seq and first.data["w"] == second.data["w"]
        fences = [e for e in log if e.kind == "fence"]
        assert [e.data["epoch"] for e in fences] == list(range(1, len(fences) + 1))
        assert reads_ok, "a reader saw a hole or went backwards"
    finally:
        for w in worlds:
            await w.close()


async def _wait_for_lock_waiter(server: PostgresServer) -> int:
    """The pid of the backend waiting on a row lock (our blocked append)."""
    conn = await _admin(server)
    try:
        end = time.monotonic() + 20.0
        while time.monotonic() < end:
            pid = await conn.fetchval(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database() LIMIT 1"
            )
            if pid is not None:
                return int(pid)
            await asyncio.sleep(0.02)
        raise AssertionError("the append never blocked on the held row lock")
    finally:
        await conn.close()


async def _terminate(server: PostgresServer, pid: int) -> None:
    conn = await _admin(server)
    try:
        await conn.execute("SELECT pg_terminate_backend($1, 5000)", pid)
    finally:
        await conn.close()


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
async def test_a_connection_cut_mid_append(
    pg: PostgresWorld, postgres_server: PostgresServer, keyed: bool
) -> None:
    """Cut while the append waits on the server: an unkeyed append may have landed or
    not, so the caller gets BackendUnavailable (and here nothing landed); a keyed one
    is retried inside the world and lands exactly once."""
    await pg.append("s", [NewEntry("before", {})])
    blocker = await _admin(postgres_server)
    tx = blocker.transaction()
    await tx.start()
    await blocker.execute(
        f'SELECT 1 FROM "fxworld_{pg.namespace}".sessions WHERE session_id = $1 FOR UPDATE', "s"
    )
    key = "k1" if keyed else None
    call = asyncio.create_task(pg.append("s", [NewEntry("during", {})], key=key))
    try:
        await _terminate(postgres_server, await _wait_for_lock_waiter(postgres_server))
        if keyed:
            await _wait_for_lock_waiter(postgres_server)  # the world's retry, blocked again
            await tx.rollback()
            assert await asyncio.wait_for(call, 30) == 2
        else:
            with pytest.raises(BackendUnavailable):
                await asyncio.wait_for(call, 30)
            await tx.rollback()
    finally:
        await blocker.close()
    kinds = [e.kind for e in await pg.read("s")]
    assert kinds == (["before", "during"] if keyed else ["before"])
    assert await pg.append("s", [NewEntry("after", {})], key=key) == 2 if keyed else True
    if not keyed:
        assert await pg.append("s", [NewEntry("after", {})]) == 2


async def test_pooled_connections_cut_while_idle_are_replaced_silently(
    pg: PostgresWorld, postgres_server: PostgresServer
) -> None:
    await asyncio.gather(*(pg.append(f"s{i}", [NewEntry("a", {})]) for i in range(4)))
    assert await postgres_server.acut_connections() >= 1
    await asyncio.sleep(1.0)  # let the client see the closed sockets
    assert await pg.append("s0", [NewEntry("b", {})]) == 2
    assert [e.kind for e in await pg.read("s0")] == ["a", "b"]


async def test_server_down_is_backend_unavailable_then_the_world_recovers(
    postgres_server: PostgresServer,
) -> None:
    ns = fresh_namespace()
    w = PostgresWorld(postgres_server.url, namespace=ns)
    await w.setup()
    try:
        fence = await w.acquire("s")
        await w.append("s", [NewEntry("a", {"n": 1})], fence=fence, key="k", wake=0)
        await postgres_server.akill()
        try:
            for call in (
                w.read("s"),
                w.append("s", [NewEntry("b", {})], fence=fence),
                w.acquire("s"),
                w.take_wake(lease=5),
            ):
                with pytest.raises(BackendUnavailable) as info:
                    await call
                assert isinstance(info.value, ConnectionError)
        finally:
            await postgres_server.astart()
        # crash-restart survival: everything acknowledged is there, fences still hold
        assert await w.append("s", [NewEntry("a", {"n": 1})], key="k") == 2
        assert await w.append("s", [NewEntry("b", {})], fence=fence) == 3
        lease = await w.take_wake(lease=5)
        assert lease is not None and lease.session_id == "s"
        other = PostgresWorld(postgres_server.url, namespace=ns)
        try:
            assert [(e.seq, e.kind, e.epoch) for e in await other.read("s")] == [
                (1, "fence", 1),
                (2, "a", 1),
                (3, "b", 1),
            ]
        finally:
            await other.close()
    finally:
        await w.close()


async def test_restart_survival_with_a_crash(postgres_server: PostgresServer) -> None:
    ns = fresh_namespace()
    w = PostgresWorld(postgres_server.url, namespace=ns)
    await w.setup()
    try:
        seqs = [await w.append(f"s{i % 3}", [NewEntry("e", {"i": i})] * 2) for i in range(30)]
        await w.wake("s1", delay=0)
        await postgres_server.acrash_restart()
        for i in range(3):
            got = await w.read(f"s{i}")
            assert [e.data["i"] for e in got] == [j for j in range(30) if j % 3 == i for _ in "xx"]
        assert max(seqs) == 20
        lease = await w.take_wake(lease=5)
        assert lease is not None and lease.session_id == "s1"
    finally:
        await w.close()


async def test_follow_is_pushed_by_notify(postgres_server: PostgresServer) -> None:
    """With the polling fallback set to a minute, only NOTIFY can deliver in time."""
    ns = fresh_namespace()
    follower = PostgresWorld(postgres_server.url, namespace=ns, follow_poll=60.0)
    writer = PostgresWorld(postgres_server.url, namespace=ns)
    await writer.setup()
    stream = follower.follow("s")
    try:
        await writer.append("s", [NewEntry("first", {})])
        assert (await asyncio.wait_for(anext(stream), 20)).kind == "first"
        for i in range(3):
            await writer.append("s", [NewEntry("next", {"i": i})])
            entry = await asyncio.wait_for(anext(stream), 20)
            assert (entry.seq, entry.data) == (i + 2, {"i": i})
        # the listener's connection is cut: it reconnects and the follower goes on
        await postgres_server.acut_connections()
        await writer.append("s", [NewEntry("after-cut", {})])
        assert (await asyncio.wait_for(anext(stream), 20)).kind == "after-cut"
        await writer.append("s", [NewEntry("pushed-again", {})])
        assert (await asyncio.wait_for(anext(stream), 20)).kind == "pushed-again"
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await follower.close()
        await writer.close()


async def test_a_namespace_made_by_schema_version_1_is_upgraded_and_keeps_its_data(
    postgres_server: PostgresServer,
) -> None:
    ns = fresh_namespace()
    old = PostgresWorld(postgres_server.url, namespace=ns)
    await old.setup()
    await old.append("s", [NewEntry("a", {"n": 1})])
    await old.close()
    conn = await _admin(postgres_server)
    schema = f'"fxworld_{ns}"'
    try:  # as version 1 left it: no fx_append_quiet
        await conn.execute(f"DROP FUNCTION {schema}.fx_append_quiet")
        await conn.execute(f"DELETE FROM {schema}.migrations WHERE version > 1")
        new = PostgresWorld(postgres_server.url, namespace=ns)
        try:  # no setup(): the first append finds the function missing and migrates
            assert await new.append("s", [NewEntry("b", {"n": 2})]) == 2
            assert [e.kind for e in await new.read("s")] == ["a", "b"]
        finally:
            await new.close()
        versions = await conn.fetch(f"SELECT version FROM {schema}.migrations ORDER BY 1")
        assert [r[0] for r in versions] == [m.version for m in MIGRATIONS]
    finally:
        await conn.close()


async def test_busy_writers_push_every_append_to_every_follower(
    postgres_server: PostgresServer,
) -> None:
    """Appends to followed sessions are pushed by NOTIFYs a writer coalesces: with
    the polling fallback set to a minute, 8 concurrent writers' appends all reach
    their followers in time, none lost between two coalesced NOTIFYs."""
    ns = fresh_namespace()
    follower = PostgresWorld(postgres_server.url, namespace=ns, follow_poll=60.0)
    writer = PostgresWorld(postgres_server.url, namespace=ns, pool_size=8)
    await writer.setup()
    sids = [f"s{k}" for k in range(8)]
    streams = [follower.follow(sid) for sid in sids]
    n = 25

    async def write(sid: str) -> None:
        for i in range(n):
            await writer.append(sid, [NewEntry("e", {"i": i})])

    async def drain(stream: AsyncIterator[Any]) -> list[int]:
        return [(await anext(stream)).data["i"] for _ in range(n)]

    try:
        await writer.append(sids[0], [NewEntry("e", {"i": -1})])  # the listener is up
        assert (await asyncio.wait_for(anext(streams[0]), 20)).data["i"] == -1
        readers = [asyncio.ensure_future(drain(s)) for s in streams]
        await _followed(postgres_server, ns, sids)  # every follower has registered
        await asyncio.gather(*(write(sid) for sid in sids))
        got = await asyncio.wait_for(asyncio.gather(*readers), 30)
        assert got == [list(range(n))] * 8
    finally:
        for stream in streams:
            await stream.aclose()  # type: ignore[attr-defined]
        await follower.close()
        await writer.close()


async def test_followers_woken_together_read_together_each_its_own_slice(
    postgres_server: PostgresServer,
) -> None:
    """The followers a world's notifications wake at once share one read, and each
    still gets exactly the entries after its own cursor: two followers of one
    session at different cursors, a session first written while followed, and a
    backlog longer than one read's page."""
    ns = fresh_namespace()
    writer = PostgresWorld(postgres_server.url, namespace=ns)
    await writer.setup()
    await writer.append("a", [NewEntry("e", {"i": i}) for i in range(1, 4)])
    await writer.append("b", [NewEntry("e", {"i": 1})])
    follower = PostgresWorld(postgres_server.url, namespace=ns, follow_poll=60.0)
    cursors = {"a@0": ("a", 0), "a@2": ("a", 2), "b@0": ("b", 0), "c@0": ("c", 0)}
    streams = {name: follower.follow(sid, after) for name, (sid, after) in cursors.items()}

    async def take(name: str, n: int) -> list[int]:
        return [(await anext(streams[name])).data["i"] for _ in range(n)]

    pending: list[asyncio.Future[list[int]]] = []
    try:
        got = await asyncio.wait_for(
            asyncio.gather(take("a@0", 3), take("a@2", 1), take("b@0", 1)), 20
        )
        assert got == [[1, 2, 3], [3], [1]]
        pending = [
            asyncio.ensure_future(take(name, n))
            for name, n in (("a@0", 2), ("a@2", 2), ("b@0", 1), ("c@0", 1))
        ]
        await _followed(postgres_server, ns, ["a", "b", "c"])  # every follower waits
        await asyncio.gather(
            writer.append("a", [NewEntry("e", {"i": 4}), NewEntry("e", {"i": 5})]),
            writer.append("b", [NewEntry("e", {"i": 2})]),
            writer.append("c", [NewEntry("e", {"i": 1})]),
        )
        got = await asyncio.wait_for(asyncio.gather(*pending), 20)
        assert got == [[4, 5], [4, 5], [2], [1]]
        backlog = [NewEntry("e", {"i": i}) for i in range(6, 1206)]
        await writer.append("a", backlog[:600])
        await writer.append("a", backlog[600:])
        got = await asyncio.wait_for(asyncio.gather(take("a@0", 1200)), 30)
        assert got == [list(range(6, 1206))]
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for stream in streams.values():
            await stream.aclose()  # type: ignore[attr-defined]
        await follower.close()
        await writer.close()


async def test_appends_notify_only_sessions_somebody_follows(
    pg: PostgresWorld, postgres_server: PostgresServer
) -> None:
    got: list[str] = []
    conn = await _admin(postgres_server)
    await conn.add_listener(f"fxworld_{pg.namespace}", lambda *a: got.append(a[3]))
    stream = pg.follow("watched")
    try:
        await pg.append("watched", [NewEntry("a", {})])
        assert (await asyncio.wait_for(anext(stream), 20)).kind == "a"
        await pg.append("unwatched", [NewEntry("a", {})])
        await pg.append("watched", [NewEntry("b", {})])
        assert (await asyncio.wait_for(anext(stream), 20)).kind == "b"
        await asyncio.sleep(0.2)
        assert "unwatched" not in got and got.count("watched") >= 1
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
    # once nobody follows, appends stop notifying (the listener took its row out)
    schema = f'"fxworld_{pg.namespace}"'
    for _ in range(100):
        if not await conn.fetchval(f"SELECT count(*) FROM {schema}.follows"):
            break
        await asyncio.sleep(0.05)
    assert (
        await conn.fetchval(f"SELECT followers FROM {schema}.sessions WHERE session_id = 'watched'")
        == 0
    )
    got.clear()
    await pg.append("watched", [NewEntry("c", {})])
    await asyncio.sleep(0.2)
    assert got == []
    await conn.close()


async def test_a_closed_world_leaves_no_follower_behind(
    pg: PostgresWorld, postgres_server: PostgresServer
) -> None:
    other = PostgresWorld(postgres_server.url, namespace=pg.namespace)
    stream = other.follow("s")
    await pg.append("s", [NewEntry("a", {})])
    assert (await asyncio.wait_for(anext(stream), 20)).kind == "a"
    await other.close()  # the follower never stopped iterating
    await stream.aclose()  # type: ignore[attr-defined]
    conn = await _admin(postgres_server)
    try:
        rows = await conn.fetchval(f'SELECT count(*) FROM "fxworld_{pg.namespace}".follows')
        assert rows == 0
    finally:
        await conn.close()


async def test_namespaces_share_nothing(postgres_server: PostgresServer) -> None:
    a = PostgresWorld(postgres_server.url, namespace="Tenant_" + uuid.uuid4().hex[:8])
    b = PostgresWorld(postgres_server.url, namespace=a.namespace.lower())
    await a.setup()
    await b.setup()
    try:
        fence = await a.acquire("s")
        await a.append("s", [NewEntry("x", {})], fence=fence, key="k", wake=0)
        assert await b.read("s") == []
        assert await b.take_wake(lease=5) is None
        assert await b.list_sessions() == []
        assert (await b.acquire("s")).epoch == 1
        assert await b.append("s", [NewEntry("y", {})], key="k") == 2
        assert [e.kind for e in await a.read("s")] == ["fence", "x"]
        assert await a.list_sessions() == ["s"]
    finally:
        await a.close()
        await b.close()


async def test_the_applications_engine_is_used_and_left_open(
    postgres_server: PostgresServer,
) -> None:
    engine = create_async_engine(
        postgres_server.url.replace("postgresql://", "postgresql+asyncpg://")
    )
    try:
        w = PostgresWorld(engine, namespace=fresh_namespace())
        assert w.engine is engine
        await w.setup()
        await w.append("s", [NewEntry("a", {})])
        stream = w.follow("s")
        assert (await asyncio.wait_for(anext(stream), 20)).kind == "a"
        await stream.aclose()  # type: ignore[attr-defined]
        await w.close()
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT 1"))).scalar_one() == 1
    finally:
        await engine.dispose()


async def test_fx_append_is_the_quiet_append_and_a_notify(
    postgres_server: PostgresServer,
) -> None:
    """``fx_append`` (for SQL callers that do not coalesce NOTIFYs) runs the one body
    of the append, ``fx_append_quiet``: the same positions, fence and expect checks,
    keys, and a NOTIFY for a followed session in its own commit."""
    ns = fresh_namespace()
    world = PostgresWorld(postgres_server.url, namespace=ns)
    await world.setup()
    fence = await world.acquire("s")
    conn = await _admin(postgres_server)
    schema = f'"fxworld_{ns}"'
    call = f"SELECT {schema}.fx_append($1, $2, $3, NULL, $4, $5, $6, NULL)"
    try:
        heard: list[str] = []
        await conn.add_listener(f"fxworld_{ns}", lambda *args: heard.append(args[3]))
        await conn.execute(f"INSERT INTO {schema}.follows VALUES ('s', pg_backend_pid())")
        seq = await conn.fetchval(call, "s", ["a"], ['{"n": 1}'], fence.epoch, 1, b"k")
        assert seq == 2
        assert await conn.fetchval(call, "s", ["a"], ['{"n": 1}'], fence.epoch, None, b"k") == 2
        with pytest.raises(asyncpg.PostgresError, match="conflict"):
            await conn.fetchval(call, "s", ["b"], ['{"n": 2}'], fence.epoch, 1, None)
        with pytest.raises(asyncpg.PostgresError, match="fenced"):
            await conn.fetchval(call, "s", ["b"], ['{"n": 2}'], fence.epoch - 1, None, None)
        await wait_until(lambda: bool(heard), 10)  # delivered after the commit
        assert heard == ["s"]
        assert [(e.seq, e.kind, e.data) for e in await world.read("s")] == [
            (1, "fence", {"epoch": fence.epoch}),
            (2, "a", {"n": 1}),
        ]
    finally:
        await conn.close()
        await world.close()


async def test_migrations_from_several_processes_at_once(postgres_server: PostgresServer) -> None:
    ns = fresh_namespace()
    url = _url(postgres_server, ns)
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "fxworld.cli",
            "setup",
            "--world",
            u,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        for u in (url, url, url, _url(postgres_server, ns + "_b"))
    ]
    outputs = await asyncio.gather(*(p.communicate() for p in procs))
    for p, (out, _) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, out.decode()
        assert b"is ready" in out
    conn = await _admin(postgres_server)
    try:
        for name in (ns, ns + "_b"):
            versions = await conn.fetch(f'SELECT version FROM "fxworld_{name}".migrations')
            assert sorted(r[0] for r in versions) == [m.version for m in MIGRATIONS]
    finally:
        await conn.close()
    w = PostgresWorld.from_url(url)
    try:
        await w.setup()  # again: idempotent
        assert await w.append("s", [NewEntry("a", {})]) == 1
    finally:
        await w.close()


async def test_bad_input_and_refusals_leave_stored_data_unchanged(
    pg: PostgresWorld, postgres_server: PostgresServer
) -> None:
    fence = await pg.acquire("s")
    await pg.append("s", [NewEntry("a", {"v": 1})], fence=fence, key="k", wake=30)
    await pg.acquire("s")  # `fence` is stale now
    lease_other = WakeLease("s", "forged", 1, datetime.now(UTC))
    before = await _snapshot(postgres_server, pg.namespace)
    big = {"x": "y" * (pg.max_entry_bytes + 1)}
    attempts: list[tuple[type[Exception], Awaitable[object]]] = [
        (Fenced, pg.append("s", [NewEntry("b", {})], fence=fence)),
        (Fenced, pg.append("new", [NewEntry("b", {})], fence=Fence("new", 3, 1))),
        (Conflict, pg.append("s", [NewEntry("b", {})], expect=1)),
        (Conflict, pg.append("new", [NewEntry("b", {})], expect=4, wake=0)),
        (InvalidEntry, pg.append("s", [NewEntry("ok", {}), NewEntry("b", big)])),
        (InvalidEntry, pg.append("s", [NewEntry("ok", {}), NewEntry("fence", {})])),
        (InvalidEntry, pg.append("s", [NewEntry("ok", {}), NewEntry("b", {"f": float("nan")})])),
        (InvalidSessionId, pg.append("s'; DROP TABLE x; --", [NewEntry("b", {})])),
        (InvalidSessionId, pg.acquire("../s")),
        (InvalidSessionId, pg.delete("a b")),
        (LeaseLost, pg.finish_wake(lease_other)),
        (LeaseLost, pg.renew_wake(lease_other, lease=5)),
    ]
    attempts += [
        (InvalidArgument, pg.read("s", 2**70)),
        (InvalidArgument, pg.finish_wake(WakeLease("s", 5, 1, datetime.now(UTC)))),  # type: ignore[arg-type]
    ]
    for error, call in attempts:
        with pytest.raises(error):
            await call
    assert await _snapshot(postgres_server, pg.namespace) == before


async def test_data_the_server_would_alter_round_trips_exactly(pg: PostgresWorld) -> None:
    odd = [
        NewEntry("nul\x00kind\\x", {"s": "a\x00b", "nested": {"n": "\x00"}}),
        NewEntry("surrogate\ud800", {"f": 1e23, "g": -1.5e300, "h": 1e-7, "i": 10**30}),
        NewEntry("plain", {"z": 1.0, "a": [1, 2.5, "e+5"], "u": "é☃", "": None, "t": True}),
    ]
    await pg.append("s", odd, key="key\x00with nul")
    got = await pg.read("s")
    assert [(e.kind, e.data) for e in got] == [(e.kind, e.data) for e in odd]
    assert [type(e.data["f" if i == 1 else "s"]) for i, e in enumerate(got[:2])] == [str, float]
    assert isinstance(got[2].data["z"], float)
    assert await pg.append("s", [NewEntry("again", {})], key="key\x00with nul") == 3


async def test_urls_schemes_and_masking(postgres_server: PostgresServer) -> None:
    base = postgres_server.url.split("://", 1)[1]
    for scheme in ("postgresql", "postgres", "postgresql+asyncpg"):
        w = open_world(f"{scheme}://{base}?namespace=n1&max_entry_bytes=100")
        assert isinstance(w, PostgresWorld)
        assert (w.namespace, w.max_entry_bytes) == ("n1", 100)
        await w.close()
    secret = PostgresWorld("postgresql://user:s3cr3t@127.0.0.1:1/db", namespace="x")
    assert "s3cr3t" not in repr(secret)
    with pytest.raises(BackendUnavailable) as info:
        await secret.read("s")
    assert "s3cr3t" not in str(info.value)
    await secret.close()
    with pytest.raises(ConfigurationError):
        PostgresWorld("mysql://u@h/db")
    with pytest.raises(ConfigurationError):
        PostgresWorld.from_url(f"postgresql://{base}?pool_size=lots")
    direct = PostgresWorld(f"postgresql://{base}?namespace=n2", max_entry_bytes=7)
    assert (direct.namespace, direct.max_entry_bytes) == ("n2", 7)
    await direct.close()
    unset = PostgresWorld(postgres_server.url, namespace=fresh_namespace("unset"))
    assert await unset.append("s", [NewEntry("a", {})]) == 1  # sets its namespace up
    await unset.close()
    assert PostgresWorld.capabilities == {"durable", "shared", "push_follow"}


async def test_take_wakes_in_a_batch_skips_held_rows(pg: PostgresWorld) -> None:
    for i in range(5):
        await pg.wake(f"s{i}")
    first = await pg.take_wakes(lease=30, limit=3)
    rest = await pg.take_wakes(lease=30, limit=10)
    assert len(first) == 3 and len(rest) == 2
    assert sorted(w.session_id for w in first + rest) == [f"s{i}" for i in range(5)]
    assert await pg.take_wake(lease=30) is None


async def test_more_concurrent_calls_than_connections_all_complete(
    postgres_server: PostgresServer,
) -> None:
    w = PostgresWorld(postgres_server.url, namespace=fresh_namespace(), pool_size=2)
    await w.setup()
    try:
        seqs = await asyncio.gather(
            *(w.append(f"s{i % 5}", [NewEntry("e", {"i": i})]) for i in range(300))
        )
        assert sorted(seqs) == sorted(j for _ in range(5) for j in range(1, 61))
        await asyncio.gather(*(w.wake(f"s{i}") for i in range(50)))
        assert len(await w.take_wakes(lease=30, limit=100)) == 5 + 45
    finally:
        await w.close()


def test_one_world_used_from_several_event_loops(postgres_server: PostgresServer) -> None:
    """Each ``asyncio.run`` is a new event loop; the world drops what the last one kept."""
    w = PostgresWorld(postgres_server.url, namespace=fresh_namespace())
    asyncio.run(w.setup())
    assert asyncio.run(w.append("s", [NewEntry("a", {})])) == 1
    assert asyncio.run(w.append("s", [NewEntry("b", {})])) == 2

    async def first_followed() -> int:
        stream = w.follow("s")
        entry = await asyncio.wait_for(anext(stream), 20)
        await stream.aclose()  # type: ignore[attr-defined]
        return entry.seq

    assert asyncio.run(first_followed()) == 1
    assert asyncio.run(first_followed()) == 1
    assert [e.kind for e in asyncio.run(w.read("s"))] == ["a", "b"]
    asyncio.run(w.close())


async def test_the_test_server_wants_its_password_over_tcp_like_the_official_image(
    postgres_server: PostgresServer,
) -> None:
    s = postgres_server
    assert s.password and s.password not in (s.user, s.database)
    assert f":{s.password}@" in s.url
    with pytest.raises(asyncpg.PostgresError, match="password"):
        await asyncpg.connect(host=s.host, port=s.port, user=s.user, database=s.database)
    with pytest.raises(asyncpg.InvalidPasswordError):
        await asyncpg.connect(
            host=s.host, port=s.port, user=s.user, password="wrong", database=s.database
        )
