"""S3World on a real S3 server (SeaweedFS ``weed mini``, or MinIO in Docker): the
whole kit and every guarantee W1-W18, then what is particular to S3 (the conditional-write check at
setup, request counts, compaction under races, wake intents of writers that died,
errors and credentials)."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fxworld import NewEntry, open_world
from fxworld.errors import ConfigurationError, LeaseLost, WorldError
from fxworld_conformance import Target, WorldSuite
from fxworld_conformance.runner import run_check
from fxworld_conformance.suite import MACHINE_CHECKS, assert_results
from fxworld_s3 import S3World
from fxworld_s3._follow import AT_ONCE, POLLS_PER_SECOND, QUIET_READS_PER_SECOND
from fxworld_s3._log import parse_segment
from tests.support.namespaces import fresh_namespace
from tests.support.s3_server import SECRET_KEY, S3Server

BUCKET = "fxworld-test"


def _world(server: S3Server, **kw: object) -> S3World:
    return S3World(BUCKET, endpoint_url=server.endpoint, namespace=fresh_namespace(), **kw)  # type: ignore[arg-type]


class TestS3World(WorldSuite):
    """The whole kit (directed checks, state machines, the process tier with SIGKILL
    and SIGSTOP inside calls, cut and stalled connections through the kit's proxy in
    front of the endpoint, a crash-restart of the server on its data dir) and the
    example tests of every guarantee. No row of the process tier may be skipped.

    Every S3 request takes 10-30 ms on a loaded 2-core machine (PostgreSQL: 0.3 ms),
    so the two state machines run at the kit's ``quick`` size unless
    ``FXWORLD_S3_KIT_PROFILE=ci`` asks for the full one; the directed checks and the
    process tier run as the kit's profile says."""

    @pytest.fixture
    def fxworld_target(self, s3_server: S3Server) -> Target:
        return Target(
            url=s3_server.url(),
            restart=s3_server.acrash_restart,
            extra_capabilities=frozenset({"restartable"}),
            secrets=(SECRET_KEY,),  # from the environment, never in a URL
        )

    @pytest.mark.fxworld_slow
    @pytest.mark.parametrize("machine", MACHINE_CHECKS)
    def test_stateful(
        self, machine: str, fxworld_target: Target, fxworld_profile: str, fxworld_seed: int
    ) -> None:
        profile = os.environ.get("FXWORLD_S3_KIT_PROFILE", "quick")
        assert_results(run_check(machine, fxworld_target, profile=profile, seed=fxworld_seed))

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


@pytest.fixture
async def s3(s3_server: S3Server) -> AsyncIterator[S3World]:
    w = _world(s3_server)
    await w.setup()
    yield w
    await w.close()


async def _keys_and_bodies(w: S3World) -> dict[str, bytes]:
    """Every object of the world's namespace, with its body: equal iff nothing changed."""
    out = {}
    for key, _ in await w.store.list(w.keys.root):
        got = await w.store.get(key)
        assert isinstance(got, tuple)
        out[key] = got[0]
    return out


def _strip_conditions(params: dict[str, object], **_: object) -> None:
    params.pop("IfNoneMatch", None)
    params.pop("IfMatch", None)


# -- S3 specifics ---------------------------------------------------------------------


async def test_setup_refuses_a_server_that_ignores_conditional_writes(
    s3_server: S3Server,
) -> None:
    """A client whose conditions never reach the server (as behind a proxy that drops
    the headers, or on a store that ignores them) must not start: W2 and W4 would
    break silently."""
    from aiobotocore.session import get_session

    async with get_session().create_client(
        "s3", endpoint_url=s3_server.endpoint, region_name="us-east-1"
    ) as client:
        client.meta.events.register("before-parameter-build.s3.PutObject", _strip_conditions)
        w = S3World("fxworld-unconditional", endpoint_url=s3_server.endpoint, client=client)
        with pytest.raises(ConfigurationError, match="does not honour conditional writes") as info:
            await w.setup()
        assert s3_server.endpoint in str(info.value)
        await w.close()
        assert await client.list_buckets()  # the application's client is left open


async def test_setup_creates_the_bucket_and_is_idempotent(s3_server: S3Server) -> None:
    bucket = f"fxworld-new-{uuid.uuid4().hex[:8]}"
    w = S3World(bucket, endpoint_url=s3_server.endpoint, namespace="a")
    await w.setup()
    await w.setup()
    assert await w.append("s", [NewEntry("a", {})]) == 1
    await w.close()


async def test_reading_a_thousand_entries_before_and_after_compaction(
    s3_server: S3Server,
) -> None:
    ns = fresh_namespace()
    writer = S3World(BUCKET, endpoint_url=s3_server.endpoint, namespace=ns)
    await writer.setup()
    # 1,000 entries in 1,000 batches, written without compaction (as by old writers)
    writer.logs._compacting.add("big")  # this test writes the segments itself, below
    for i in range(0, 1000, 50):
        await asyncio.gather(
            *(writer.append("big", [NewEntry("e", {"i": j})]) for j in range(i, i + 50))
        )

    async def fresh_read() -> tuple[int, list[int]]:
        reader = S3World(BUCKET, endpoint_url=s3_server.endpoint, namespace=ns)
        reader.logs._compacting.add("big")
        try:
            before = reader.store.requests
            got = await reader.read("big", limit=1000)
            return reader.store.requests - before, [e.data["i"] for e in got]
        finally:
            await reader.close()

    cost, seen = await fresh_read()
    assert seen == list(range(1000))
    assert cost >= 1000  # one GET per batch
    writer.logs._compacting.discard("big")
    st = await writer.logs.state("big")
    for _ in range(4):  # whoever writes compacts; 4 rounds make 4 segments of 256 entries
        await writer.logs.compact("big", st)
    cost, seen = await fresh_read()
    assert seen == list(range(1000))
    assert cost <= 10, cost
    await writer.close()


async def test_a_writers_compaction_copies_each_entry_a_few_times(s3: S3World) -> None:
    """A writer's compaction never rewrites a large segment for a small tail: over
    640 one-entry appends its segment PUTs carry under 3 copies of each entry (a
    segment merged with every run of 16 carried 8.5), segments stay at most 256
    entries, and a fresh reader reads every entry in order."""
    copied = 0
    put_new = s3.store.put_new

    async def counting(key: str, body: bytes) -> str | None:
        nonlocal copied
        if "/c/" in key:
            copied += sum(b.count for b in parse_segment(body)[0])
        return await put_new(key, body)

    s3.store.put_new = counting  # type: ignore[method-assign]
    for i in range(640):
        await s3.append("lv", [NewEntry("e", {"i": i})])
    await s3.logs.drain()
    assert copied < 3 * 640, copied
    segments = [s3.keys.range_of(k) for k, _ in await s3.store.list(s3.keys.segments("lv", 0))]
    assert segments and all(b - a + 1 <= 256 for a, b in segments), segments
    reader = _pair(s3)
    assert [e.data["i"] for e in await reader.read("lv", limit=1000)] == list(range(640))
    await reader.close()


async def test_compaction_under_racing_writers_keeps_the_log_exact(s3_server: S3Server) -> None:
    ns = fresh_namespace()
    worlds = [S3World(BUCKET, endpoint_url=s3_server.endpoint, namespace=ns) for _ in range(3)]
    await worlds[0].setup()

    async def writer(k: int) -> None:
        for i in range(40):
            await worlds[k].append("s", [NewEntry("e", {"w": k, "i": i})] * (1 + i % 3))

    await asyncio.gather(*(writer(k) for k in range(3)))
    for w in worlds:
        await w.logs.drain()
    segments = await worlds[0].store.list(worlds[0].keys.segments("s", 0))
    assert segments, "no writer compacted"
    reader = S3World(BUCKET, endpoint_url=s3_server.endpoint, namespace=ns)
    log = await reader.read("s", limit=10_000)
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    for k in range(3):
        mine = [(e.data["i"]) for e in log if e.data["w"] == k]
        assert mine == [i for i in range(40) for _ in range(1 + i % 3)]
    for w in [*worlds, reader]:
        await w.close()


# -- keyed appends at a constant cost (#25 item 6) --------------------------------------


async def _keyed_cost(s3: S3World, sid: str, key: str, entries: int = 1) -> tuple[int, int, int]:
    """A fresh world's keyed append: (its requests, the seq it returned, the objects
    it added to the namespace)."""
    fresh = _pair(s3)
    fresh.logs._compacting.add(sid)  # its own compaction would be counted too
    objects = len(await s3.store.list(s3.keys.root))
    before = fresh.store.requests
    seq = await fresh.append(sid, [NewEntry("e", {"key": key})] * entries, key=key)
    cost = fresh.store.requests - before
    await fresh.close()
    return cost, seq, len(await s3.store.list(s3.keys.root)) - objects


async def _grow(s3: S3World, sid: str, to: int, keys: dict[str, int]) -> None:
    """Append batches of 10 entries up to ``to`` entries: every third keyed, from
    ``s3`` (a warm writer), every seventh from a fresh world that writes no key."""
    n = (await s3.logs.refresh(sid, await s3.logs.state(sid))).tail.last
    while n < to:
        batch = [NewEntry("e", {"i": n})] * 10
        if n // 10 % 7 == 6:
            other = _pair(s3)
            n = await other.append(sid, batch)
            await other.close()
        elif n // 10 % 3 == 0:
            key = f"k{n}"
            n = keys[key] = await s3.append(sid, batch, key=key)
        else:
            n = await s3.append(sid, batch)
    await s3.logs.drain()


async def test_a_fresh_worlds_keyed_append_costs_at_most_8_requests(s3: S3World) -> None:
    """At 100, 1,000 and 5,000 entries, a fresh world's keyed append finds a repeated
    key (the first of the log, and a recent one) and a new one in at most 8 requests:
    the key maps of the newest segment and of the tail batch (W6)."""
    keys: dict[str, int] = {}
    costs = {}
    for length in (100, 1000, 5000):
        await _grow(s3, "s", length, keys)
        for name, key in (("first key", "k0"), ("recent key", max(keys, key=lambda k: keys[k]))):
            cost, seq, added = await _keyed_cost(s3, "s", key)
            assert (seq, added) == (keys[key], 0), (length, key)  # W6: nothing written
            costs[length, name] = cost
        cost, seq, added = await _keyed_cost(s3, "s", f"new{length}")
        assert added == 1 and seq > length
        keys[f"new{length}"] = seq
        costs[length, "new key"] = cost
        # a fresh non-keyed writer's batch last, with no compaction since
        other = _pair(s3)
        other.logs._compacting.add("s")
        await other.append("s", [NewEntry("e", {})])
        await other.close()
        for name, key in (("segment map", "k0"), ("tail batch's map", f"new{length}")):
            cost, seq, added = await _keyed_cost(s3, "s", key)
            assert (seq, added) == (keys[key], 0), (length, key)
            costs[length, f"after a fresh plain batch, {name}"] = cost
    print("keyed append, fresh world:", costs)
    assert max(costs.values()) <= 8, costs


async def test_keyed_appends_without_compaction_or_with_old_segments(s3: S3World) -> None:
    """A log whose writers never compacted (the tail batch's map from position 1), and
    one whose segments an earlier version wrote (no maps: read through), both
    answer every key right."""
    keys: dict[str, int] = {}
    s3.logs._compacting.add("plain")
    await _grow(s3, "plain", 300, keys)
    for key, seq in keys.items():
        cost, got, added = await _keyed_cost(s3, "plain", key)
        assert (got, added) == (seq, 0) and cost <= 8, (key, cost)
    s3.logs._compacting.discard("plain")
    keys = {}
    await _grow(s3, "old", 400, keys)
    for k, _ in await s3.store.list(s3.keys.segments("old", 0)):  # rewrite as old segments
        body = await s3.store.get(k)
        assert isinstance(body, tuple)
        batches, mapped = parse_segment(body[0])
        assert mapped is not None and set(mapped) <= set(keys)
        old = [{f: v for f, v in b.to_json().items() if f not in ("kf", "K")} for b in batches]
        await s3.store.put(k, json.dumps(old).encode())
    for key, seq in keys.items():
        assert (await _keyed_cost(s3, "old", key))[1:] == (seq, 0), key
    _, seq, added = await _keyed_cost(s3, "old", "brand-new", entries=3)
    assert added == 1 and seq == (await s3.last_entry("old")).seq  # type: ignore[union-attr]


async def test_key_maps_follow_deletes_races_and_mixed_writers(s3: S3World) -> None:
    """Keys of a deleted generation are not keys of the next; racing fresh writers of
    one key land it once; a mixed log keeps every key through compaction (W6)."""
    keys: dict[str, int] = {}
    await _grow(s3, "s", 200, keys)
    await s3.delete("s")
    cost, seq, added = await _keyed_cost(s3, "s", "k0")
    assert (seq, added) == (1, 2)  # the first batch of the new log, and its marker
    assert cost <= 5, cost  # GET g, LIST segments, LIST batches, PUT marker, PUT batch
    keys = {"k0": 1}
    for i in range(8):  # fresh writers of both kinds, racing; a warm one, compacting
        worlds = [_pair(s3) for _ in range(3)]
        batch = [NewEntry("e", {"i": i})] * (1 + i % 3)
        seqs = await asyncio.gather(
            worlds[0].append("s", batch, key=f"r{i}"),
            worlds[1].append("s", batch, key=f"r{i}"),
            worlds[2].append("s", batch),
        )
        assert seqs[0] == seqs[1], seqs  # W6: one call landed, the other returned its seq
        keys[f"r{i}"] = seqs[0]
        for w in worlds:
            await w.close()
        for _ in range(2):
            keys[f"w{i}"] = await s3.append("s", [NewEntry("e", {})], key=f"w{i}")
            await s3.append("s", [NewEntry("e", {})])
    await s3.logs.drain()
    log = await s3.read("s", limit=10_000)
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    assert len(log) == 1 + sum(2 * (1 + i % 3) + 3 for i in range(8))
    assert await s3.store.list(s3.keys.segments("s", 1))
    for key, seq in keys.items():
        assert (await _keyed_cost(s3, "s", key))[1:] == (seq, 0), key


async def test_a_wake_intent_of_a_writer_that_died_is_recovered(s3: S3World) -> None:
    """The writer stored its intent and its batch, then died before applying the
    wake (W7). The next take_wake finds the batch at once: at the position right
    after the tail the writer saw, or at a later one (it lost a race first). A batch
    that lands only after that take looked (the writer was slow, then died) is
    found by the next take_wake after RECOVER_AFTER. Either way the wake is applied
    once."""
    from fxworld_s3._layout import Batch
    from fxworld_s3._log import Write
    from fxworld_s3._wakes import RECOVER_AFTER

    async def intend(sid: str, after: int) -> str:
        token = uuid.uuid4().hex
        await s3.wakes.intend(sid, token, 0, after, 0.0)
        return token

    async def land(sid: str, token: str) -> None:
        await s3.logs.write(
            sid,
            lambda st, ok: Write(
                Batch(
                    st.tail.last + 1,
                    1,
                    0,
                    False,
                    token=token,
                    wake=0.0,
                    at=time.time(),
                    items=[("p", "{}")],
                )
            ),
        )

    other = S3World(BUCKET, endpoint_url=s3.endpoint_url, namespace=s3.namespace)
    await land("s", await intend("s", 0))
    await s3.append("raced", [NewEntry("first", {})])
    await land("raced", await intend("raced", 0))  # its batch is at 2, not 1
    taken = {(await other.take_wake(lease=5)) for _ in range(2)}
    assert {lease.session_id for lease in taken if lease} == {"s", "raced"}
    for lease in taken:
        assert lease is not None
        await other.finish_wake(lease)
    token = await intend("late", 0)
    assert await other.take_wake(lease=5) is None  # the writer may still be on its way
    await land("late", token)
    assert await other.take_wake(lease=5) is None  # looked once: its writer settles it
    await asyncio.sleep(RECOVER_AFTER + 0.1)
    lease = await other.take_wake(lease=5)
    assert lease is not None and lease.session_id == "late"
    await other.finish_wake(lease)
    assert await other.take_wake(lease=5) is None  # each applied once
    await other.close()


async def test_a_take_covers_every_landed_intent_once_one_made_the_session_due(
    s3: S3World,
) -> None:
    """A writer landed two batches with wakes, due at once and in 1 s, then died
    before applying either (W7). A take applies the first (its wake is due), which
    makes the session due: it then looks for the second's batch too and applies it
    before the take, which covers both (W11, W13). Once finished, nothing is left,
    not even after the second's due time."""
    from fxworld_s3._layout import Batch
    from fxworld_s3._log import Write

    for after, delay in ((0, 0.0), (1, 1.0)):
        token = uuid.uuid4().hex
        await s3.wakes.intend("s", token, 0, after, delay)
        batch = Batch(
            after + 1, 1, 0, False, token=token, wake=delay, at=time.time(), items=[("p", "{}")]
        )
        await s3.logs.write("s", lambda st, ok, batch=batch: Write(batch))
    other = S3World(BUCKET, endpoint_url=s3.endpoint_url, namespace=s3.namespace)
    lease = await other.take_wake(lease=5)
    assert lease is not None and (lease.session_id, lease.attempt) == ("s", 1)
    await other.finish_wake(lease)
    await asyncio.sleep(1.2)  # past the second wake's due time, and RECOVER_AFTER
    assert await other.take_wake(lease=5) is None
    await other.close()


async def test_a_finish_whose_delete_was_sent_twice_is_not_lease_lost(s3: S3World) -> None:
    """The HTTP client sends a DELETE again when the connection is cut after it was
    sent (idempotent); the copy is refused (412) when the first one removed the
    state. finish_wake landed then: it must not raise LeaseLost (the process tier,
    under connection cuts, saw a finish reported refused that had removed the wake,
    W12). A finish that did not land still says so."""
    await s3.wake("s")
    lease = await s3.take_wake(lease=5)
    assert lease is not None
    delete = s3.store.delete

    async def sent_twice(key: str, *, etag: str | None = None) -> bool:
        await delete(key, etag=etag)  # landed; the connection was cut after it
        return await delete(key, etag=etag)  # the client's copy: refused

    s3.store.delete = sent_twice  # type: ignore[method-assign]
    await s3.finish_wake(lease)
    assert not await s3.wakes.pending("s")
    assert await s3.take_wake(lease=5) is None
    with pytest.raises(LeaseLost):
        await s3.finish_wake(lease)


async def test_bad_input_and_refusals_leave_stored_objects_unchanged(s3: S3World) -> None:
    from fxworld import Fence
    from fxworld.errors import Conflict, Fenced, InvalidEntry, InvalidSessionId

    fence = await s3.acquire("s")
    await s3.append("s", [NewEntry("a", {})], fence=fence, key="k", wake=30)
    await s3.acquire("s")
    await s3.logs.drain()
    before = await _keys_and_bodies(s3)
    attempts = [
        (Fenced, s3.append("s", [NewEntry("b", {})], fence=fence)),
        (Fenced, s3.append("new", [NewEntry("b", {})], fence=Fence("new", 3, 1))),
        (Conflict, s3.append("s", [NewEntry("b", {})], expect=1)),
        (InvalidEntry, s3.append("s", [NewEntry("ok", {}), NewEntry("fence", {})])),
        (InvalidSessionId, s3.append("../x", [NewEntry("b", {})])),
        (InvalidSessionId, s3.delete("a/b")),
    ]
    for error, call in attempts:
        with pytest.raises(error):
            await call
    await s3.logs.drain()
    assert await _keys_and_bodies(s3) == before


async def test_credentials_never_appear_in_reprs_or_errors(
    s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fxworld_s3._store as store

    monkeypatch.setattr(store, "_SESSION", None)  # a session that reads the chain anew
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-" + SECRET_KEY)
    w = S3World(f"fxworld-x-{uuid.uuid4().hex[:6]}", endpoint_url=s3_server.endpoint)
    with pytest.raises(ConfigurationError) as info:
        await w.setup()
    for text in (str(info.value), repr(info.value), repr(w), str(w)):
        assert SECRET_KEY not in text
    await w.close()
    with pytest.raises(ConfigurationError, match="credentials") as url_info:
        S3World.from_url(f"s3://user:{SECRET_KEY}@bucket/p")
    assert SECRET_KEY not in str(url_info.value)


async def test_missing_credentials_name_the_variables(
    s3_server: S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    import fxworld_s3._store as store

    monkeypatch.setattr(store, "_SESSION", None)  # a session that reads the chain anew
    w = S3World(BUCKET, endpoint_url=s3_server.endpoint, namespace="nocreds")
    with pytest.raises(ConfigurationError, match="AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        await w.read("s")
    await w.close()


async def test_a_missing_bucket_is_a_configuration_error(s3_server: S3Server) -> None:
    w = S3World(f"fxworld-absent-{uuid.uuid4().hex[:6]}", endpoint_url=s3_server.endpoint)
    for call in (w.wake("s"), w.append("s", [NewEntry("a", {})]), w.read("s")):
        with pytest.raises(ConfigurationError, match=r"NoSuchBucket|not found"):
            await asyncio.wait_for(call, 30)
    await w.close()


async def test_an_unreachable_server_is_backend_unavailable() -> None:
    from fxworld.errors import BackendUnavailable

    w = S3World(BUCKET, endpoint_url="http://127.0.0.1:9", namespace="x", request_budget=0.5)
    with pytest.raises(BackendUnavailable) as info:
        await w.read("s")
    assert isinstance(info.value, ConnectionError)
    await w.close()


async def test_urls_and_options(s3_server: S3Server) -> None:
    url = s3_server.url(
        prefix="apps/one", namespace="n1", max_entry_bytes="100", region="eu-west-1"
    )
    w = open_world(url)
    assert isinstance(w, S3World)
    assert (w.bucket, w.prefix, w.namespace, w.max_entry_bytes) == (BUCKET, "apps/one/", "n1", 100)
    assert (w.endpoint_url, w.region) == (s3_server.endpoint, "eu-west-1")
    for bad in ("s3://Bad_Bucket/p", f"{url}&color=blue", "s3://b/p?max_entry_bytes=lots"):
        with pytest.raises(ConfigurationError):
            open_world(bad)
    assert S3World.capabilities == {"durable", "shared"}
    with pytest.raises(WorldError):
        S3World("ok-bucket", prefix="/abs")


async def test_the_server_crash_restart_keeps_everything(s3_server: S3Server) -> None:
    w = _world(s3_server)
    await w.setup()
    fence = await w.acquire("s")
    await w.append("s", [NewEntry("a", {"n": 1})], fence=fence, key="k", wake=0)
    await s3_server.acrash_restart()
    assert await w.append("s", [NewEntry("a", {"n": 1})], key="k") == 2
    assert await w.append("s", [NewEntry("b", {})], fence=fence) == 3
    lease = await w.take_wake(lease=5)
    assert lease is not None and lease.session_id == "s"
    await w.close()


async def test_idle_followers_share_one_poller(s3_server: S3Server) -> None:
    """200 idle followers of 100 sessions in one process ask the sessions' next positions at
    most POLLS_PER_SECOND times a second in all (each follower polled its own: about
    500 GETs a second), read a quiet log at most QUIET_READS_PER_SECOND times a
    second in all (a LIST and a GET each; each follower read every 2 s), and still
    see a new entry of their session."""
    w = _world(s3_server)
    await w.setup()
    sessions = [f"idle-{i}" for i in range(100)]
    for i in range(0, len(sessions), 20):
        await asyncio.gather(*(w.append(sid, [NewEntry("m", {})]) for sid in sessions[i : i + 20]))
    seen: dict[int, list[int]] = {i: [] for i in range(2 * len(sessions))}

    async def follow(i: int) -> None:
        async for entry in w.follow(sessions[i % len(sessions)]):
            seen[i].append(entry.seq)

    tasks = [asyncio.create_task(follow(i)) for i in seen]
    try:
        for _ in range(300):  # every follower has its first entry within 30 s
            if all(seen.values()):
                break
            await asyncio.sleep(0.1)
        assert all(seen.values())
        await asyncio.sleep(1.0)  # past the start: every follower waits
        before, started = w.store.counts.copy(), time.monotonic()
        await asyncio.sleep(2.0)
        took = time.monotonic() - started
        gets, lists = (w.store.counts[op] - before[op] for op in ("GET", "LIST"))
        reads = QUIET_READS_PER_SECOND * took + 2 * AT_ONCE
        assert gets <= POLLS_PER_SECOND * took + AT_ONCE + reads, gets
        assert lists <= reads, lists
        await w.append(sessions[7], [NewEntry("m", {})])
        for _ in range(100):
            if len(seen[7]) == len(seen[107]) == 2:
                break
            await asyncio.sleep(0.1)
        assert seen[7] == seen[107] == [1, 2]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await w.close()


async def test_requests_leave_no_garbage_for_full_collections(s3: S3World) -> None:
    """S3 requests, 404s included, leave no reference cycles behind: botocore's new
    parser per response did, about 40 objects a request, which reached the oldest
    generation and brought CPython's full collections (a pause of the whole event
    loop, about 100 ms here) every 800 or so requests, a follower's p99."""
    import gc

    await s3.append("g", [NewEntry("m", {})])
    st = await s3.logs.state("g")
    gc.collect()
    gc.disable()
    try:
        for i in range(20):
            await s3.append("g", [NewEntry("m", {"i": i})])
            assert await s3.logs.get_batch("g", st, 10_000) is None  # a 404, as a follower's
            await s3.read("g", 0)
        left = gc.collect()
    finally:
        gc.enable()
    assert left < 20, f"{left} objects in cycles after 60 requests"


async def test_wakes_reuse_their_connections(s3: S3World) -> None:
    """Each new wake writes a due index key; an empty one closed its connection, so
    400 wakes opened 449 connections (new TCP, and TLS on AWS, handshakes)."""
    loop = asyncio.get_running_loop()
    opened = 0
    create_connection = loop.create_connection

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal opened
        opened += 1
        return await create_connection(*args, **kwargs)

    loop.create_connection = counted  # type: ignore[method-assign]
    try:
        for i in range(0, 200, 50):
            await asyncio.gather(*(s3.wake(f"conn-{j}") for j in range(i, i + 50)))
    finally:
        del loop.create_connection  # type: ignore[method-assign]
    assert opened <= 64, f"{opened} connections for 200 wakes, 50 at a time"


# -- dot ids, bounded caches, masked endpoints ---------------------------------------------


async def test_dot_session_ids_are_refused(s3: S3World) -> None:
    """'.' and '..' would be path segments of the keys (s/../g): refused before any
    request (W15); ids that merely hold dots are keys like any other."""
    from fxworld.errors import InvalidSessionId

    await s3.append("before", [NewEntry("a", {})])
    await s3.logs.drain()  # the append's tail hint, written in the background
    before = await _keys_and_bodies(s3)
    requests = s3.store.requests
    for sid in (".", ".."):
        for call in (
            s3.acquire(sid),
            s3.append(sid, [NewEntry("a", {})], key="k", wake=0),
            s3.read(sid),
            s3.wake(sid),
            s3.delete(sid),
        ):
            with pytest.raises(InvalidSessionId):
                await call
    assert s3.store.requests == requests
    assert await _keys_and_bodies(s3) == before
    for sid in ("a..b", ".x", "x.", "..."):
        await s3.append(sid, [NewEntry("a", {"sid": sid})])
        assert [e.data for e in await s3.read(sid)] == [{"sid": sid}]


@pytest.mark.parametrize("prefix", ["..", "../x", "a/./b", "a/..", "./a", "a/b/../c/"])
def test_a_prefix_with_dot_segments_is_refused(s3_server: S3Server, prefix: str) -> None:
    with pytest.raises(ConfigurationError, match="segment"):
        S3World(BUCKET, prefix=prefix, endpoint_url=s3_server.endpoint)
    with pytest.raises(ConfigurationError, match="segment"):
        open_world(s3_server.url(prefix=prefix))


async def test_s3_state_cache_is_bounded(s3_server: S3Server) -> None:
    """Reading ids that do not exist, writing and waking more sessions than the cache
    holds: the world keeps at most ``cache_size`` states, no lock once nothing runs,
    and a forgotten session still answers right (keys W6, wakes W12)."""
    w = _world(s3_server, cache_size=16)
    await w.setup()
    try:
        sem = asyncio.Semaphore(8)

        async def bounded(coro: Any) -> Any:
            async with sem:
                return await coro

        assert not any(await asyncio.gather(*(bounded(w.read(f"no-{i}")) for i in range(200))))
        assert len(w.logs.states) <= 16
        sids = [f"s-{i}" for i in range(40)]
        firsts = await asyncio.gather(
            *(bounded(w.append(s, [NewEntry("a", {"s": s})], key="k", wake=0)) for s in sids)
        )
        assert len(w.logs.states) <= 16 and len(w.wakes.states) <= 16
        again = await asyncio.gather(
            *(bounded(w.append(s, [NewEntry("a", {"s": s})], key="k")) for s in sids)
        )
        assert again == firsts == [1] * 40  # W6 after the state was dropped
        taken = set()
        while (lease := await w.take_wake(lease=30)) is not None:  # 40 due, 16 cached
            taken.add(lease.session_id)
            await w.finish_wake(lease)
        assert taken == set(sids)
        assert len(w.logs.states) <= 16 and len(w.wakes.states) <= 16
        assert len(w.locks) == 0 and len(w.wakes.locks) == 0
    finally:
        await w.close()
    with pytest.raises(ConfigurationError):
        _world(s3_server, cache_size=0)


async def test_s3_errors_mask_a_token_in_the_endpoint_url(s3_server: S3Server) -> None:
    w = S3World(BUCKET, endpoint_url=f"{s3_server.endpoint}/?token=Tok3nXyz", namespace="t")
    with pytest.raises(WorldError) as info:
        await w.read("s")
    await w.close()
    for text in (str(info.value), repr(w)):
        assert "Tok3nXyz" not in text and "token=***" in text, text


async def test_list_sessions_is_one_list_and_survives_a_delete_that_died(s3: S3World) -> None:
    """list_sessions reads the markers with one LIST per page; a delete that died
    after ending its generation is finished (marker removed) by the next reader,
    and a session written again after its delete is listed again."""
    for sid in ("b", "a", "c"):
        await s3.append(sid, [NewEntry("e", {})])
    other = S3World(BUCKET, endpoint_url=s3.endpoint_url, namespace=s3.namespace)
    before = other.store.counts.copy()
    assert await other.list_sessions() == ["a", "b", "c"]
    assert other.store.counts - before == {"LIST": 1}
    # a delete that died right after landing its end batch: no roll forward, no unmark
    from fxworld_s3._layout import Batch
    from fxworld_s3._log import Write

    await s3.logs.write(
        "b", lambda st, ok: Write(Batch(st.tail.last + 1, 0, st.tail.top, False, deleted=True))
    )
    assert await other.read("b") == []  # the reader rolls the delete forward
    assert await other.list_sessions() == ["a", "c"]
    await other.append("b", [NewEntry("again", {})])
    assert await s3.list_sessions(after="a", limit=1) == ["b"]
    await other.close()


async def test_an_append_with_wake_returns_after_two_puts_and_is_owed_at_once(
    s3: S3World,
) -> None:
    """The intent with its due index key (two PUTs at once), then the batch, are the
    append's only requests; the wake is settled afterwards, in the background, and
    another world can take it at once (W7)."""
    await s3.append("s", [NewEntry("first", {})], wake=0)
    lease = await s3.take_wake(lease=5)
    assert lease is not None
    await s3.finish_wake(lease)  # the world now knows the wake state's etag
    await s3.logs.drain()
    rounds: list[list[str]] = []  # the PUTs started while none was in flight, and after
    flying = 0
    store = s3.store

    def counted(name: str) -> None:
        method = getattr(store, name)

        async def wrapper(key: str, *args: object) -> object:
            nonlocal flying
            if not flying:
                rounds.append([])
            rounds[-1].append(key)
            flying += 1
            try:
                return await method(key, *args)
            finally:
                flying -= 1

        setattr(store, name, wrapper)

    for name in ("put", "put_new", "put_if"):
        counted(name)
    before = store.counts.copy()
    await s3.append("s", [NewEntry("second", {})], wake=0)
    assert store.counts - before == {"PUT": 3}
    assert [sorted(k.split("/")[1] for k in keys) for keys in rounds] == [["w", "wd"], ["s"]]
    for name in ("put", "put_new", "put_if"):
        delattr(store, name)
    other = S3World(BUCKET, endpoint_url=s3.endpoint_url, namespace=s3.namespace)
    lease = await other.take_wake(lease=5)
    assert lease is not None and lease.session_id == "s"
    await other.finish_wake(lease)
    await s3.logs.drain()
    assert await other.take_wake(lease=5) is None  # applied once
    await other.close()


async def test_wake_states_are_listed_without_taking_them(s3: S3World) -> None:
    """WakeLister on S3: a wake requested, one owed by an append (still an intent
    while its settle runs), and one leased; nothing is taken by looking."""
    from fxworld.protocol import WakeLister

    assert isinstance(s3, WakeLister)
    await s3.wake("a", delay=60)
    await s3.append("b", [NewEntry("x", {})], wake=0)
    await s3.wake("c")
    lease = await s3.take_wakes(lease=30, limit=2)
    held = {x.session_id: x for x in lease}
    other = S3World(BUCKET, endpoint_url=s3.endpoint_url, namespace=s3.namespace)
    states = await other.list_wakes()
    assert [st.session_id for st in states] == ["a", "b", "c"]
    a = states[0]
    assert a.leased_until is None and a.attempt == 0
    assert a.due_at.timestamp() > time.time() + 50
    for st in states[1:]:
        assert (st.leased_until is not None) == (st.session_id in held)
    assert await other.list_wakes(after="a", limit=1) == [states[1]]
    assert await other.wake_state("never") is None
    for x in lease:
        await s3.finish_wake(x)
    assert [st.session_id for st in await other.list_wakes()] == ["a"]
    await other.close()


# -- delete_if_idle: the races prune meets (fxworld.prune, IdleDeleter) ----------------


def _pair(s3: S3World) -> S3World:
    """Another world on the same namespace: another process's view, with its own cache."""
    return S3World(BUCKET, endpoint_url=s3.endpoint_url, namespace=s3.namespace)


async def _taken(world: S3World) -> str | None:
    lease = await world.take_wake(lease=5)
    if lease is None:
        return None
    await world.finish_wake(lease)
    return lease.session_id


async def test_delete_if_idle_keeps_an_append_that_lands_before_its_claim(s3: S3World) -> None:
    """Prune looked (last seq 1) and found no wake; then, right before its claim of
    position 2, another process's prompt with a wake lands there. The claim's
    conditional create loses: nothing is deleted, and the prompt and its wake stay."""
    writer = _pair(s3)
    await s3.append("s", [NewEntry("note", {"n": 1})])
    assert await writer.read("s") != []  # the writer knows the tail too
    last = await s3.last_entry("s")
    assert last is not None and last.seq == 1
    claim = s3.keys.batch("s", 0, 2)
    put_new = s3.store.put_new
    raced: list[int] = []

    async def append_first(key: str, body: bytes) -> str | None:
        if key == claim:
            raced.append(await writer.append("s", [NewEntry("prompt", {"text": "wait"})], wake=0))
        return await put_new(key, body)

    s3.store.put_new = append_first  # type: ignore[method-assign]
    assert await s3.delete_if_idle("s", last=1) is False
    assert raced == [2]
    fresh = _pair(s3)
    assert [e.data for e in await fresh.read("s")] == [{"n": 1}, {"text": "wait"}]
    await writer.logs.drain()
    assert await _taken(fresh) == "s"  # W7: the prompt's wake is kept
    for w in (writer, fresh):
        await w.close()


async def test_delete_if_idle_claim_first_sends_a_racing_append_to_a_fresh_log(
    s3: S3World,
) -> None:
    """The claim lands first: the racing append (its writer still holds the old
    tail) loses position 2, reads the end there and lands at seq 1 of the next
    generation, with its wake (W7): deleted, and the new prompt starts the session
    anew, as after any delete. Nothing that returned is lost."""
    writer = _pair(s3)
    await s3.append("s", [NewEntry("note", {"n": 1})])
    assert await writer.read("s") != []
    claim = s3.keys.batch("s", 0, 2)
    put_new = s3.store.put_new
    raced: list[int] = []

    async def append_after(key: str, body: bytes) -> str | None:
        tag = await put_new(key, body)
        if key == claim:
            raced.append(await writer.append("s", [NewEntry("prompt", {"text": "new"})], wake=0))
        return tag

    s3.store.put_new = append_after  # type: ignore[method-assign]
    assert await s3.delete_if_idle("s", last=1) is True
    assert raced == [1]
    fresh = _pair(s3)
    assert [(e.seq, e.data) for e in await fresh.read("s")] == [(1, {"text": "new"})]
    assert await fresh.list_sessions() == ["s"]
    await writer.logs.drain()
    assert await _taken(fresh) == "s"
    for w in (writer, fresh):
        await w.close()


async def test_delete_if_idle_keeps_a_wake_requested_after_its_wake_check(s3: S3World) -> None:
    """The window the claim cannot close (docs/s3.md): a wake() that arrives after
    delete_if_idle read the wake state does not stop the delete; it is kept, as a
    wake of the emptied session (W13: no request is lost)."""
    other = _pair(s3)
    await s3.append("s", [NewEntry("note", {"n": 1})])
    pending = s3.wakes.pending

    async def then_a_wake(sid: str) -> bool:
        found = await pending(sid)
        await other.wake(sid)
        return found

    s3.wakes.pending = then_a_wake  # type: ignore[method-assign]
    assert await s3.delete_if_idle("s", last=1) is True
    assert await other.read("s") == []
    assert await _taken(other) == "s"
    await other.close()


async def test_delete_if_idle_racing_appends_keep_every_session_whole(s3: S3World) -> None:
    """Many sessions, each pruned by one world while another appends to it at the
    same moment: each session is either kept whole (both entries) or deleted with
    the append landing at seq 1 of its fresh log; never cut, never a lost append."""
    writer = _pair(s3)
    sids = [f"r{i}" for i in range(8)]
    for sid in sids:
        await s3.append(sid, [NewEntry("note", {"n": 1})])
        assert await writer.read(sid) != []
    results = await asyncio.gather(
        *(s3.delete_if_idle(sid, last=1) for sid in sids),
        *(writer.append(sid, [NewEntry("prompt", {"text": sid})]) for sid in sids),
    )
    deleted, seqs = results[: len(sids)], results[len(sids) :]
    fresh = _pair(s3)
    for sid, gone, seq in zip(sids, deleted, seqs, strict=True):
        log = [(e.seq, e.data) for e in await fresh.read(sid)]
        if gone:
            assert log == [(1, {"text": sid})] and seq == 1, (sid, log)
        else:
            assert log == [(1, {"n": 1}), (2, {"text": sid})] and seq == 2, (sid, log)
    for w in (writer, fresh):
        await w.close()


async def test_last_entry_and_delete_if_idle_request_counts(s3: S3World) -> None:
    """last_entry is the tail lookup: 1 GET with the session cached, a handful in a
    fresh world; an idle delete_if_idle adds 1 GET (wake state) + 1 GET (the tail
    confirmed) + 1 PUT (the claim) to what delete does."""
    for i in range(40):
        await s3.append("s", [NewEntry("note", {"i": i})])
    await s3.logs.drain()  # compaction
    before = s3.store.counts.copy()
    last = await s3.last_entry("s")
    assert last is not None and last.seq == 40 and last.data == {"i": 39}
    assert s3.store.counts - before == {"GET": 1}
    fresh = _pair(s3)
    before = fresh.store.counts.copy()
    assert await fresh.last_entry("s") == last
    print("last_entry, fresh world:", dict(fresh.store.counts - before))
    before = fresh.store.counts.copy()
    assert await fresh.delete_if_idle("s", last=40) is True
    print("delete_if_idle, 40 batches:", dict(fresh.store.counts - before))
    assert await s3.last_entry("s") is None
    await fresh.close()


# -- the due index (#25: take_wake lists only what is due) ------------------------------


async def _index(world: S3World) -> list[str]:
    """Every key of the due index, over all its prefixes."""
    pages = [await world.store.list(p) for p in world.keys.due_prefixes()]
    return [k for page in pages for k, _ in page]


async def test_take_wake_costs_the_same_at_40_and_at_400_due(s3: S3World) -> None:
    """A fresh world's take LISTs the first page of each index prefix, reads the
    state of the sessions it looks at and takes one: the queue's length does not
    change what one take costs."""
    costs = []
    for queued in (40, 400):
        ns = S3World(BUCKET, endpoint_url=s3.endpoint_url, namespace=f"{s3.namespace}-{queued}")
        for i in range(0, queued, 50):
            await asyncio.gather(*(ns.wake(f"q{j}") for j in range(i, min(queued, i + 50))))
        fresh = _pair(ns)
        before = fresh.store.counts.copy()
        assert await _taken(fresh) is not None
        costs.append(fresh.store.counts - before)
        await asyncio.gather(ns.close(), fresh.close())
    assert costs[0] == costs[1]
    assert costs[0]["LIST"] == 5  # one per prefix of the index, one of the agents (a/)
    print("take + finish, fresh world:", dict(costs[0]))


async def test_the_due_index_is_spread_and_emptied_by_finished_wakes(s3: S3World) -> None:
    """Index keys land under every prefix; once every wake is taken and finished (and
    an append's wake too), none is left: a stale key is removed once a state that no
    longer names it landed."""
    for i in range(40):
        await s3.wake(f"sp{i}")
    await s3.append("sp-append", [NewEntry("e", {})], wake=0)
    keys = await _index(s3)
    assert {k.split("/")[2] for k in keys} == {"0", "1", "2", "3"}
    taken = 0
    while lease := await s3.take_wake(lease=5):
        await s3.finish_wake(lease)
        taken += 1
    assert taken == 41
    await s3.logs.drain()
    assert await _index(s3) == []
    assert await s3.take_wake(lease=5) is None


async def test_an_idle_worlds_look_for_wakes_is_one_list(s3: S3World) -> None:
    """Once a listing found the index empty, a look costs one LIST (of one key of the
    whole index) until a key shows up; a wake made by another world is still taken."""
    other = _pair(s3)
    lists: list[int] = []
    for _ in range(4):
        before = s3.store.counts["LIST"]
        assert await s3.take_wake(lease=5) is None
        lists.append(s3.store.counts["LIST"] - before)
    assert lists == [5, 1, 1, 1]  # the first: the 4 prefixes and the agents (a/)
    await other.wake("idle-then-due")
    lease = await s3.take_wake(lease=5)
    assert lease is not None and lease.session_id == "idle-then-due"
    await s3.finish_wake(lease)
    await other.close()


async def test_finished_wakes_remove_their_index_keys_together(s3: S3World) -> None:
    """Each finish removes its state (one DELETE); the index keys of the wakes that
    finish together go in one request, not one DELETE each."""
    for i in range(40):
        await s3.wake(f"fin{i}")
    leases = [await s3.take_wake(lease=30) for _ in range(40)]
    await s3.logs.drain()
    before = s3.store.counts.copy()
    await asyncio.gather(*(s3.finish_wake(lease) for lease in leases if lease is not None))
    await s3.logs.drain()
    deletes = s3.store.counts["DELETE"] - before["DELETE"]
    assert 40 < deletes <= 42, deletes
    assert await _index(s3) == []


async def test_a_renewal_moves_a_due_cover_to_the_lease_end(s3: S3World) -> None:
    """A long turn does not sit at the front of the index: the first renewal of its
    lease moves the session's key to the lease's end; finishing removes it."""
    await s3.wake("long")
    lease = await s3.take_wake(lease=30)
    assert lease is not None
    await s3.logs.drain()
    assert [s3.keys.parse_due(k)[0] / 1000 <= time.time() for k in await _index(s3)] == [True]
    lease = await s3.renew_wake(lease, lease=30)
    await s3.logs.drain()
    [key] = await _index(s3)
    assert s3.keys.parse_due(key)[0] / 1000 >= time.time() + 25
    other = _pair(s3)
    assert await other.take_wake(lease=5) is None  # leased: W12
    await s3.finish_wake(lease)
    await s3.logs.drain()
    assert await _index(s3) == []
    await other.close()


async def test_an_index_key_no_state_names_is_removed_and_loses_no_wake(
    s3: S3World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key whose writer died before its state landed is passed over, then removed
    after a conditional write of the state; a world that still holds the state as
    it was before that write has its next write refused, reads again and writes a
    fresh key: its wake is delivered."""
    from fxworld_s3 import _wakes

    stale = _pair(s3)
    await stale.wake("orphan")  # its state and key exist; stale caches the state
    lease = await s3.take_wake(lease=5)
    assert lease is not None
    await s3.finish_wake(lease)
    await s3.logs.drain()
    await stale.wakes._get("orphan")  # the state as it is now (none): cached by stale
    dead = s3.keys.due("orphan", int(time.time() * 1000), "deadwriter")
    await s3.store.put(dead, b"")  # a writer that died between its key and its state
    assert await s3.take_wake(lease=5) is None
    monkeypatch.setattr(_wakes, "ORPHAN_AFTER", 0.0)
    await asyncio.sleep(0.1)
    assert await s3.take_wake(lease=5) is None
    await s3.logs.drain()
    assert await _index(s3) == []  # removed, after a write of the (empty) state
    await stale.wake("orphan")  # its cached state is out of date: refused, read again
    assert await _taken(s3) == "orphan"
    # the key of its refused attempt is named by no state: an orphan, removed in turn
    sweeper = _pair(s3)
    for _ in range(2):
        assert await sweeper.take_wake(lease=5) is None
    await sweeper.close()  # waits for the removal
    await s3.logs.drain()
    assert await _index(s3) == []
    await stale.close()
