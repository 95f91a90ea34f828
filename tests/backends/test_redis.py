"""RedisWorld on real Redis (one server, and a three-master Cluster): the whole kit
and every guarantee W1-W18, then what is
particular to Redis (one command per call, NOSCRIPT reload, durability detection,
partitions, Cluster slots, delete, credentials)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

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
from fxworld_conformance.procs.proxy import TcpProxy
from fxworld_conformance.runner import run_check
from fxworld_conformance.suite import assert_results
from fxworld_redis import RedisWorld
from fxworld_redis._deadline import Deadlines
from tests.support.counting_proxy import CountingProxy
from tests.support.namespaces import fresh_namespace
from tests.support.redis_server import PASSWORD, LocalRedis, RedisCluster, RedisServer


def _assert_process_tier(target: Target, profile: str, seed: int) -> None:
    """Every row of the process tier ran (none skipped) and passed, with faults
    injected inside calls (where a non-atomic append loses its wake or key)."""
    rows = run_check("processes", target, profile=profile, seed=seed)
    assert_results(rows)
    skipped = {r.name: r.detail for r in rows if r.status == "skipped"}
    assert not skipped, skipped
    main = next(r for r in rows if r.extra.get("mode"))
    assert main.extra["mode"] == "processes"
    faults = main.extra.get("faults", {})
    assert faults.get("kill_inside", 0) + faults.get("stop_inside", 0) >= 1, faults
    assert faults.get("cut", 0) >= 1, faults


class TestRedisWorld(WorldSuite):
    """The whole kit on one server (directed, stateful, and the process tier with
    SIGKILL and SIGSTOP inside calls, cut and stalled connections and a crash-restart
    of redis-server from its AOF) and the example tests of every guarantee."""

    @pytest.fixture
    def fxworld_target(self, redis_server: RedisServer) -> Target:
        return Target(
            url=redis_server.url,
            restart=redis_server.acrash_restart,
            extra_capabilities=frozenset({"restartable"}),
        )

    @pytest.mark.fxworld_slow
    def test_processes(
        self, fxworld_target: Target, fxworld_profile: str, fxworld_seed: int
    ) -> None:
        _assert_process_tier(fxworld_target, fxworld_profile, fxworld_seed)


class TestRedisClusterWorld(WorldSuite):
    """The same on a local three-master Redis Cluster (its restart SIGKILLs every node)."""

    @pytest.fixture
    def fxworld_target(self, redis_cluster: RedisCluster) -> Target:
        return Target(
            url=redis_cluster.url,
            restart=redis_cluster.acrash_restart,
            extra_capabilities=frozenset({"restartable"}),
        )

    @pytest.mark.fxworld_slow
    def test_processes(
        self, fxworld_target: Target, fxworld_profile: str, fxworld_seed: int
    ) -> None:
        _assert_process_tier(fxworld_target, fxworld_profile, fxworld_seed)


# -- helpers -----------------------------------------------------------------------------


@pytest.fixture
async def rw(redis_server: RedisServer) -> AsyncIterator[RedisWorld]:
    w = RedisWorld(redis_server.url, namespace=fresh_namespace())
    await w.setup()
    yield w
    await w.close()


def _admin(server: RedisServer) -> redis.Redis:
    return redis.Redis(host=server.host, port=server.port, password=server.password or None)


def _namespace_keys(client: redis.Redis, namespace: str) -> list[bytes]:
    return sorted(client.scan_iter(match=f"fxworld:{{{namespace}*"))


def _snapshot(client: redis.Redis, namespace: str) -> dict[bytes, object]:
    """Every key of ``namespace`` with its value: equal iff nothing changed."""
    out: dict[bytes, object] = {}
    for key in _namespace_keys(client, namespace):
        kind = client.type(key)
        if kind == b"stream":
            out[key] = client.xrange(key)
        elif kind == b"hash":
            out[key] = sorted(client.hgetall(key).items())
        elif kind == b"zset":
            out[key] = client.zrange(key, 0, -1, withscores=True)
        else:
            out[key] = client.get(key)
    return out


class CommandCounter(CountingProxy):
    """Counts the commands the client sends (each top-level RESP array is one);
    commands run inside a script are not."""

    def __init__(self, server: RedisServer) -> None:
        super().__init__(server.host, server.port)
        self.server = server

    @property
    def commands(self) -> int:
        return self.count

    def url(self, namespace: str) -> str:
        return f"redis://:{self.server.password}@127.0.0.1:{self.port}/0?namespace={namespace}"

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            parts = [line]
            if line.startswith(b"*"):
                for _ in range(int(line[1:-2])):
                    head = await reader.readline()
                    parts += [head, await reader.readexactly(int(head[1:-2]) + 2)]
                self.count += 1
            writer.write(b"".join(parts))
            await writer.drain()


def _evalsha_calls(client: redis.Redis) -> int:
    return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


# -- Redis specifics -------------------------------------------------------------------


async def test_each_call_is_one_command(redis_server: RedisServer) -> None:
    async with CommandCounter(redis_server) as proxy:
        w = RedisWorld.from_url(proxy.url(fresh_namespace()))
        await w.setup()
        admin = _admin(redis_server)
        evalsha_before = _evalsha_calls(admin)
        try:

            async def once() -> dict[str, int]:
                counts: dict[str, int] = {}

                async def count(name: str, call: Awaitable[Any]) -> Any:
                    before = proxy.commands
                    result = await call
                    counts[name] = proxy.commands - before
                    return result

                f = await count("acquire", w.acquire("s"))
                await count("append", w.append("s", [NewEntry("a", {"x": 1})] * 3, fence=f))
                await count(
                    "append+key+wake",
                    w.append("s", [NewEntry("p", {})], key=uuid.uuid4().hex, wake=0),
                )
                lease = await count("take_wake", w.take_wake(lease=30))
                lease = await count("renew_wake", w.renew_wake(lease, lease=30))
                await count("finish_wake", w.finish_wake(lease))
                await count("wake", w.wake("s"))
                await count("read", w.read("s"))
                await count("delete", w.delete("s"))
                return counts

            await once()
            counts = await once()
            assert counts == dict.fromkeys(counts, 1), counts
            evalsha = _evalsha_calls(admin) - evalsha_before
            # INFO commandstats: every call an EVALSHA but read, one XRANGE (a script
            # would copy a large value's reply through Lua)
            assert evalsha == 2 * (len(counts) - 1)
        finally:
            await w.close()


async def test_lost_scripts_are_loaded_again(rw: RedisWorld, redis_server: RedisServer) -> None:
    """After SCRIPT FLUSH (as after a restart or a failover) every call still works."""
    fence = await rw.acquire("s")
    admin = _admin(redis_server)
    admin.script_flush()
    assert await rw.append("s", [NewEntry("a", {})], fence=fence) == 2
    admin.script_flush()
    assert [e.kind for e in await rw.read("s")] == ["fence", "a"]
    admin.script_flush()
    await rw.wake("s")
    admin.script_flush()
    lease = await rw.take_wake(lease=5)
    assert lease is not None and lease.session_id == "s"


async def test_crash_restart_keeps_acknowledged_writes(
    rw: RedisWorld, redis_server: RedisServer
) -> None:
    fence = await rw.acquire("s")
    await rw.append("s", [NewEntry("a", {"n": 1})], fence=fence, key="k", wake=0)
    await redis_server.acrash_restart()  # SIGKILL, then the AOF is replayed
    assert await rw.append("s", [NewEntry("a", {"n": 1})], key="k") == 2  # W6 still holds
    assert await rw.append("s", [NewEntry("b", {})], fence=fence) == 3
    lease = await rw.take_wake(lease=5)
    assert lease is not None and lease.session_id == "s"
    assert [(e.seq, e.kind, e.epoch) for e in await rw.read("s")] == [
        (1, "fence", 1),
        (2, "a", 1),
        (3, "b", 1),
    ]


async def test_cut_connections_are_replaced_silently(
    rw: RedisWorld, redis_server: RedisServer
) -> None:
    await asyncio.gather(*(rw.append(f"s{i}", [NewEntry("a", {})]) for i in range(4)))
    stream = rw.follow("s0")
    assert (await asyncio.wait_for(anext(stream), 20)).kind == "a"
    follower = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.2)  # the follower blocks in XREAD
    assert await redis_server.acut_connections() >= 1
    await asyncio.sleep(0.2)
    assert await rw.append("s0", [NewEntry("b", {})]) == 2
    assert (await asyncio.wait_for(follower, 20)).kind == "b"
    await stream.aclose()  # type: ignore[attr-defined]
    assert [e.kind for e in await rw.read("s0")] == ["a", "b"]


async def test_a_stalled_link_ends_at_the_calls_deadline(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("fxworld_redis._world._CALL_TIMEOUT", 0.5)
    proxy = TcpProxy(redis_server.host, redis_server.port)
    port = await proxy.start()
    w = RedisWorld(
        f"redis://:{redis_server.password}@127.0.0.1:{port}/0", namespace=fresh_namespace()
    )
    try:
        fence = await w.acquire("s")
        proxy.stall(30)
        started = time.monotonic()
        with pytest.raises(BackendUnavailable):  # sent, outcome unknown: not repeated
            await w.append("s", [NewEntry("a", {})], fence=fence)
        assert time.monotonic() - started < 10  # the deadline, not the stall, ended it
        reader = RedisWorld(redis_server.url, namespace=w.namespace)
        assert [e.kind for e in await reader.read("s")] in (["fence"], ["fence", "a"])
        await reader.close()
    finally:
        await w.close()
        await proxy.close()


async def test_a_deadline_is_a_timeout_and_a_cancel_stays_a_cancel() -> None:
    deadlines = Deadlines(0.2)
    with pytest.raises(TimeoutError):
        await deadlines.run(asyncio.sleep, 30)
    assert await deadlines.run(asyncio.sleep, 0, "done") == "done"
    task = asyncio.ensure_future(deadlines.run(asyncio.sleep, 30))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # a call inside a call keeps the outer deadline; after a timeout the task runs on
    with pytest.raises(TimeoutError):
        await deadlines.run(deadlines.run, asyncio.sleep, 30)
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0
    await asyncio.sleep(0)


@pytest.mark.parametrize(
    "url", [f"redis://:{PASSWORD}@127.0.0.1:1/0", f"rediss://bob:{PASSWORD}@127.0.0.1:1"]
)
async def test_server_down_is_backend_unavailable_without_credentials(url: str) -> None:
    down = open_world(url)
    assert PASSWORD not in repr(down)
    for call in (down.read("s"), down.append("s", [NewEntry("a", {})])):
        with pytest.raises(BackendUnavailable) as info:
            await call
        assert isinstance(info.value, ConnectionError)
        assert PASSWORD not in str(info.value) and PASSWORD not in repr(info.value)
    await down.close()


async def test_durability_follows_the_servers_settings(redis_server: RedisServer) -> None:
    ns = fresh_namespace()
    w = RedisWorld(redis_server.url, namespace=ns)
    await w.setup()
    assert "durable" in w.capabilities  # appendonly yes, appendfsync always
    await w.close()
    everysec = LocalRedis(appendfsync="everysec")
    hidden = LocalRedis(extra=("--rename-command", "CONFIG", ""))
    try:
        lax = RedisWorld(everysec.url, namespace=ns)
        await lax.setup()
        assert "durable" not in lax.capabilities
        assert {"shared", "push_follow"} <= lax.capabilities
        await lax.close()
        claimed = RedisWorld(everysec.url, namespace=ns, durable=True)
        with pytest.raises(ConfigurationError, match="appendfsync always"):
            await claimed.setup()
        await claimed.close()
        for arg, expected in ((None, False), (True, True), (False, False)):
            w = RedisWorld(hidden.url, namespace=ns, durable=arg)
            await w.setup()  # CONFIG is disabled: the argument decides
            assert ("durable" in w.capabilities) is expected
            await w.close()
    finally:
        everysec.stop()
        hidden.stop()


async def test_durable_is_dropped_without_an_aof() -> None:
    no_aof = LocalRedis(extra=("--appendonly", "no"))
    try:
        w = RedisWorld(no_aof.url, namespace=fresh_namespace())
        await w.setup()
        assert w.capabilities == {"shared", "push_follow"}
        await w.close()
    finally:
        no_aof.stop()


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-lfu", "allkeys-random"])
async def test_an_evicting_redis_is_refused(policy: str) -> None:
    """A server that may evict the world's keys when its memory is full (a session's
    log would read [], its epochs start again at 1, a stale fence and a repeated key
    would land) is refused by setup(), which says what to set and writes nothing;
    durable=False (argument or URL) accepts it knowingly, without ``durable``."""
    evicting = LocalRedis(extra=("--maxmemory", "64mb", "--maxmemory-policy", policy))
    try:
        ns = fresh_namespace()
        admin = _admin(evicting)
        for world in (
            RedisWorld(evicting.url, namespace=ns),
            RedisWorld(evicting.url, namespace=ns, durable=True),
        ):
            with pytest.raises(ConfigurationError, match=policy) as info:
                await world.setup()
            assert "maxmemory-policy noeviction" in str(info.value)
            assert "durable=False" in str(info.value)
            assert PASSWORD not in str(info.value)
            with pytest.raises(ConfigurationError):
                await world.append("s", [NewEntry("a", {})])  # a call sets up first
            await world.close()
        assert _namespace_keys(admin, ns) == []  # nothing written
        for world in (
            RedisWorld(evicting.url, namespace=ns, durable=False),
            RedisWorld.from_url(f"{evicting.url}?namespace={ns}&durable=false"),
        ):
            await world.setup()
            assert world.capabilities == {"shared", "push_follow"}
            assert await world.append("s", [NewEntry("a", {})]) >= 1
            await world.close()
        admin.close()
    finally:
        evicting.stop()


async def test_policies_that_keep_keys_without_a_ttl_are_accepted() -> None:
    kept = LocalRedis(extra=("--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"))
    try:
        w = RedisWorld(kept.url, namespace=fresh_namespace())
        await w.setup()
        assert "durable" in w.capabilities  # appendfsync always, and nothing evicted
        await w.close()
    finally:
        kept.stop()


async def test_an_evicting_cluster_node_is_refused(redis_cluster: RedisCluster) -> None:
    """Every primary of a Cluster is asked, not only the one the URL names."""
    node = redis_cluster.nodes[-1]
    admin = _admin(node)
    admin.config_set("maxmemory-policy", "allkeys-lru")
    try:
        w = RedisWorld(redis_cluster.url, namespace=fresh_namespace())
        with pytest.raises(ConfigurationError, match="allkeys-lru"):
            await w.setup()
        await w.close()
        accepted = RedisWorld(redis_cluster.url, namespace=fresh_namespace(), durable=False)
        await accepted.setup()
        assert "durable" not in accepted.capabilities
        await accepted.close()
    finally:
        admin.config_set("maxmemory-policy", "noeviction")
        admin.close()


async def test_every_cluster_primary_is_asked_for_durability(redis_cluster: RedisCluster) -> None:
    """A Cluster client knows no node before its first command: the check of each
    primary's appendfsync found none to ask, and declared ``durable`` whatever they ran."""
    admin = _admin(redis_cluster.nodes[-1])
    admin.config_set("appendfsync", "everysec")
    try:
        w = RedisWorld(redis_cluster.url, namespace=fresh_namespace())
        await w.setup()
        assert "durable" not in w.capabilities
        await w.close()
    finally:
        admin.config_set("appendfsync", "always")
        admin.close()


async def test_partitions_are_fixed_by_the_first_setup(redis_server: RedisServer) -> None:
    ns = fresh_namespace()
    first = RedisWorld(f"{redis_server.url}?namespace={ns}&partitions=4")
    await first.setup()
    for i in range(12):
        await first.append(f"s{i}", [NewEntry("a", {})], wake=0)
    other = RedisWorld(redis_server.url, namespace=ns, partitions=2)
    with pytest.raises(ConfigurationError, match="set up with 4 wake partitions"):
        await other.setup()
    with pytest.raises(ConfigurationError):
        await other.read("s0")  # a call sets up first: refused the same way
    await other.close()
    lazy = RedisWorld(redis_server.url, namespace=ns)  # its first call sets it up
    await lazy.append("s12", [NewEntry("a", {})], wake=0)  # crc32("s12") % 4 == 1
    assert lazy.partitions == 4
    await lazy.close()
    adopting = RedisWorld(redis_server.url, namespace=ns)
    await adopting.setup()
    assert adopting.partitions == 4
    taken = await adopting.take_wakes(lease=30, limit=100)
    assert sorted(t.session_id for t in taken) == sorted(f"s{i}" for i in range(13))
    assert [e.kind for e in await adopting.read("s12")] == ["a"]
    assert [e.kind for e in await adopting.read("s5")] == ["a"]
    for bad in (0, 2000):
        with pytest.raises(ConfigurationError):
            RedisWorld(redis_server.url, namespace=ns, partitions=bad)
    await adopting.close()
    await first.close()


async def test_delete_removes_every_key_of_the_session(
    rw: RedisWorld, redis_server: RedisServer
) -> None:
    admin = _admin(redis_server)
    fence = await rw.acquire("gone")
    await rw.append("gone", [NewEntry("a", {})] * 3, fence=fence, key="k", wake=0)
    await rw.append("kept", [NewEntry("a", {})], key="k", wake=0)
    held = await rw.take_wake(lease=30)
    assert held is not None
    assert any(b"gone" in k for k in _namespace_keys(admin, rw.namespace))
    await rw.delete("gone")
    left = _namespace_keys(admin, rw.namespace)
    assert not [k for k in left if b"gone" in k], left
    for key in left:
        if admin.type(key) == b"zset":
            assert b"gone" not in admin.zrange(key, 0, -1)
    with pytest.raises(Fenced):
        await rw.append("gone", [NewEntry("b", {})], fence=fence)
    assert (await rw.acquire("gone")).epoch > fence.epoch
    assert [e.kind for e in await rw.read("kept")] == ["a"]


async def test_bad_input_and_refusals_leave_stored_data_unchanged(
    rw: RedisWorld, redis_server: RedisServer
) -> None:
    fence = await rw.acquire("s")
    await rw.append("s", [NewEntry("a", {"v": 1})], fence=fence, key="k", wake=30)
    await rw.acquire("s")  # `fence` is stale now
    forged = WakeLease("s", "forged", 1, datetime.now(UTC))
    admin = _admin(redis_server)
    before = _snapshot(admin, rw.namespace)
    big = {"x": "y" * (rw.max_entry_bytes + 1)}
    attempts: list[tuple[type[Exception], Awaitable[object]]] = [
        (Fenced, rw.append("s", [NewEntry("b", {})], fence=fence)),
        (Fenced, rw.append("new", [NewEntry("b", {})], fence=Fence("new", 3, 1))),
        (Conflict, rw.append("s", [NewEntry("b", {})], expect=1)),
        (Conflict, rw.append("new", [NewEntry("b", {})], expect=4, wake=0)),
        (InvalidEntry, rw.append("s", [NewEntry("ok", {}), NewEntry("b", big)])),
        (InvalidEntry, rw.append("s", [NewEntry("ok", {}), NewEntry("fence", {})])),
        (InvalidSessionId, rw.append("{s}", [NewEntry("b", {})])),
        (InvalidSessionId, rw.acquire("../s")),
        (InvalidSessionId, rw.delete("a b")),
        (LeaseLost, rw.finish_wake(forged)),
        (LeaseLost, rw.renew_wake(forged, lease=5)),
        (InvalidArgument, rw.read("s", 2**70)),
    ]
    for error, call in attempts:
        with pytest.raises(error):
            await call
    assert _snapshot(admin, rw.namespace) == before


async def test_data_redis_holds_as_bytes_round_trips_exactly(rw: RedisWorld) -> None:
    odd = [
        NewEntry("nul\x00kind\\x", {"s": "a\x00b", "nested": {"n": "\x00"}}),
        NewEntry("surrogate\ud800", {"f": 1e23, "g": -1.5e300, "h": 1e-7, "i": 10**30}),
        NewEntry("plain", {"z": 1.0, "a": [1, 2.5, "e+5"], "u": "é☃", "": None, "t": True}),
        NewEntry("new\nline,comma\n", {"s": "line\nbreak,", "k\n": "\n"}),
    ]
    key = "key\x00with nul\udc80,comma\nnewline"
    await rw.append("s", odd, key=key, wake=0)
    got = await rw.read("s")
    assert [(e.kind, e.data) for e in got] == [(e.kind, e.data) for e in odd]
    assert await rw.append("s", [NewEntry("again", {})], key=key) == 4
    assert await rw.append("s", [NewEntry("again", {})], key=key[:-1]) == 5


async def test_urls_clients_and_masking(redis_server: RedisServer) -> None:
    ns = fresh_namespace()
    w = open_world(f"{redis_server.url}?namespace={ns}&max_entry_bytes=100&partitions=3")
    assert isinstance(w, RedisWorld)
    assert (w.namespace, w.max_entry_bytes, w.partitions, w.cluster) == (ns, 100, 3, False)
    assert PASSWORD not in repr(w)
    await w.close()
    for bad in (
        "memcached://h:1/0",
        f"{redis_server.url}?partitions=many",
        f"{redis_server.url}?cluster=perhaps",
    ):
        with pytest.raises(ConfigurationError) as info:
            RedisWorld(bad)
        assert PASSWORD not in str(info.value)
    # the application's own client: used, and left open by close()
    app = aioredis.Redis(
        host=redis_server.host,
        port=redis_server.port,
        password=redis_server.password,
        retry=Retry(NoBackoff(), 0),
    )
    mine = RedisWorld(app, namespace=ns)
    assert mine.client is app
    await mine.setup()
    assert await mine.append("s", [NewEntry("a", {})]) == 1
    await mine.close()
    assert await app.ping()
    resending = aioredis.Redis(host=redis_server.host, port=redis_server.port)
    with pytest.raises(ConfigurationError, match="Retry"):
        RedisWorld(resending, namespace=ns)
    await app.aclose()
    await resending.aclose()


def test_one_world_used_from_several_event_loops(redis_server: RedisServer) -> None:
    w = RedisWorld(redis_server.url, namespace=fresh_namespace())
    asyncio.run(w.setup())
    assert asyncio.run(w.append("s", [NewEntry("a", {})])) == 1
    assert asyncio.run(w.append("s", [NewEntry("b", {})])) == 2
    assert [e.kind for e in asyncio.run(w.read("s"))] == ["a", "b"]
    asyncio.run(w.close())


async def test_on_a_cluster_every_key_of_a_partition_is_in_one_slot(
    redis_cluster: RedisCluster,
) -> None:
    """Every script's keys share one slot: the session's keys and its partition's
    queue and epoch counter (a script touching two slots would fail with CROSSSLOT)."""
    w = RedisWorld(redis_cluster.url, namespace=fresh_namespace())
    await w.setup()
    try:
        sids = [f"s{i}" for i in range(40)]
        for sid in sids:
            fence = await w.acquire(sid)
            await w.append(sid, [NewEntry("a", {})] * 2, fence=fence, key="k", wake=0)
        taken = await w.take_wakes(lease=30, limit=100)
        assert sorted(t.session_id for t in taken) == sorted(sids)
        await w.finish_wake(taken[0])
        await w.delete(sids[1])
        slots_of: dict[str, set[int]] = {}
        for node in redis_cluster.nodes:
            c = redis.Redis(host=node.host, port=node.port)
            for key in c.scan_iter(match=f"fxworld:{{{w.namespace}:*"):
                tag = key.decode().split("}", 1)[0]
                slots_of.setdefault(tag, set()).add(int(c.cluster("keyslot", key)))
            c.close()
        assert len(slots_of) == w.partitions == 16
        assert all(len(slots) == 1 for slots in slots_of.values()), slots_of
        nodes = {next(iter(s)) // 5462 for s in slots_of.values()}
        assert len(nodes) >= 2  # the partitions are spread over the masters
    finally:
        await w.close()


async def test_on_a_cluster_takers_at_once_share_one_peek(redis_cluster: RedisCluster) -> None:
    """Workers that find no hint of a ready partition at the same moment wait for one
    peek of every partition, not one each; each still gets its own wake."""
    w = RedisWorld(redis_cluster.url, namespace=fresh_namespace())
    await w.setup()
    admins = [redis.Redis(host=n.host, port=n.port) for n in redis_cluster.nodes]
    try:
        sids = [f"s{i}" for i in range(8)]
        for sid in sids:
            await w.wake(sid)

        def calls() -> int:
            return sum(_evalsha_calls(a) for a in admins)

        before = calls()
        taken = await asyncio.gather(*(w.take_wake(lease=30) for _ in sids))
        sent = calls() - before
        assert sorted(t.session_id for t in taken if t is not None) == sorted(sids)
        # one peek (16 scripts) and the takes; a peek each would be 8 x 16 = 128
        assert sent <= w.partitions + 3 * len(sids), sent
    finally:
        for a in admins:
            a.close()
        await w.close()


# -- followers ----------------------------------------------------------------------------


async def test_followers_of_a_closed_world_raise(redis_server: RedisServer) -> None:
    """close() ends the shared XREAD: a follower still waiting raises
    BackendUnavailable (it would otherwise wait for ever)."""
    w = RedisWorld(redis_server.url, namespace=fresh_namespace())
    await w.append("s", [NewEntry("a", {})])
    stream = w.follow("s")
    assert (await anext(stream)).seq == 1
    waiting = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.2)
    await w.close()
    with pytest.raises(BackendUnavailable, match="closed"):
        await asyncio.wait_for(waiting, 5)


_FOLLOWERS = 1000


async def _until(changed: asyncio.Event, done: Callable[[], bool], within: float) -> None:
    """Return once ``done()`` holds (checked each time ``changed`` is set), or after
    ``within`` seconds."""
    deadline = time.monotonic() + within
    while not done() and (left := deadline - time.monotonic()) > 0:
        changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), left)


def _blocked_clients(admins: list[redis.Redis]) -> int:
    """Connections blocked in a command (XREAD BLOCK) on every node."""
    return sum(int(a.info("clients")["blocked_clients"]) for a in admins)


@pytest.mark.parametrize("where", ["server", "cluster"])
async def test_idle_followers_do_not_starve_writers(
    where: str, request: pytest.FixtureRequest
) -> None:
    """1,000 idle followers in one process: each holds a pooled connection no more
    (the followers of a partition share one XREAD), so appends, reads and wakes keep
    working beside them, and every follower still gets its session's new entries."""
    if where == "server":
        server: RedisServer = request.getfixturevalue("redis_server")
        url, admins = server.url, [_admin(server)]
    else:
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        url, admins = cluster.url, [_admin(node) for node in cluster.nodes]
    w = RedisWorld(url, namespace=fresh_namespace())
    await w.setup()
    sessions = [f"idle-{i}" for i in range(_FOLLOWERS)]
    seen: dict[str, list[int]] = {sid: [] for sid in sessions}
    failures: list[Exception] = []
    changed = asyncio.Event()

    async def follow(sid: str) -> None:
        try:
            async for entry in w.follow(sid):
                seen[sid].append(entry.seq)
                changed.set()
        except BackendUnavailable as e:
            failures.append(e)
            changed.set()

    tasks: list[asyncio.Task[None]] = []

    def started() -> bool:  # every follower started so far yielded its first entry
        return bool(failures) or all(seen[s] for s in sessions[: len(tasks)])

    blocked_before = _blocked_clients(admins)
    try:
        for i in range(0, _FOLLOWERS, 50):  # 50 at a time: never a burst past the pool
            batch = sessions[i : i + 50]
            await asyncio.gather(*(w.append(sid, [NewEntry("m", {})]) for sid in batch))
            tasks += [asyncio.create_task(follow(sid)) for sid in batch]
            await _until(changed, started, 30)
            assert not failures, f"{len(failures)} followers failed: {failures[0]}"
        await asyncio.sleep(0.3)  # every follower waits now
        for i in range(20):
            await w.append("writer", [NewEntry("m", {"i": i})], wake=0)
            assert len(await w.read("writer", i)) == 1
            lease = await w.take_wake(lease=30)
            assert lease is not None and lease.session_id == "writer"
            await w.finish_wake(lease)
        assert _blocked_clients(admins) - blocked_before <= w.partitions
        probed = sessions[::100]
        await asyncio.gather(*(w.append(sid, [NewEntry("m", {})]) for sid in probed))
        await _until(changed, lambda: all(len(seen[s]) == 2 for s in probed), 10)
        assert [seen[s] for s in probed] == [[1, 2]] * len(probed)
        assert not failures
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await w.close()
        for a in admins:
            a.close()


def test_the_connection_budget_is_stated_and_checked() -> None:
    """``connection_budget``: per server, per node on a Cluster; below 2 is refused
    (the followers' ``XREAD`` takes one, calls need another)."""
    assert RedisWorld("redis://127.0.0.1:1/0").connection_budget == 8
    assert RedisWorld("redis://127.0.0.1:1/0?cluster=true").connection_budget == 8
    url = "redis://u:secret@127.0.0.1:1/0?cluster=true&max_connections=3"
    assert RedisWorld(url).connection_budget == 3
    for bad in ("1", "0", "many"):
        with pytest.raises(ConfigurationError, match="max_connections") as e:
            RedisWorld(f"redis://u:secret@127.0.0.1:1/0?max_connections={bad}")
        assert "secret" not in str(e.value)


async def test_rediss_against_a_plain_redis_fails_at_the_first_connect_with_a_tls_hint(
    redis_server: RedisServer,
) -> None:
    """Finding: ``rediss://`` to a plain server retried its connect timeout for 38 s and
    said only "unavailable". Now the first timed-out handshake is the error (one
    connection reaches the server, not one per retry), and it names TLS."""
    plain = redis.Redis.from_url(redis_server.url)
    try:
        before = int(plain.info("stats")["total_connections_received"])
        w = open_world(redis_server.url.replace("redis://", "rediss://", 1))
        try:
            with pytest.raises(BackendUnavailable) as info:
                await asyncio.wait_for(w.setup(), 60)
        finally:
            await w.close()
        after = int(plain.info("stats")["total_connections_received"])
    finally:
        plain.close()
    assert after - before == 1, f"{after - before} connections: the TLS connect was retried"
    message = str(info.value)
    assert "TLS may be the cause" in message and "use redis://" in message
    assert PASSWORD not in message
