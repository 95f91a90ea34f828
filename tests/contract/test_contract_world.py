"""docs/contract.md section 2 (W1-W17), called exactly as a stranger reading it would.

Only public names: ``fxworld`` (open_world, NewEntry, Entry, Fence, WakeLease, World)
and ``fxworld.errors``. Each test runs on memory://, a SQLite file and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest

from fxworld import Entry, Fence, NewEntry, WakeLease, World, open_world
from fxworld.errors import (
    Conflict,
    EntryTooLarge,
    Fenced,
    InvalidEntry,
    InvalidSessionId,
    LeaseLost,
    WorldError,
)


@pytest.fixture
async def w(world_url: str) -> AsyncIterator[World]:
    world = open_world(world_url)
    await world.setup()
    try:
        yield world
    finally:
        await world.close()


def E(kind: str = "note", **data: object) -> NewEntry:
    return NewEntry(kind, dict(data))


async def snapshot(w: World, sid: str) -> list[tuple[int, str, object, int | None]]:
    return [(e.seq, e.kind, e.data, e.epoch) for e in await w.read(sid)]


async def take_when_due(w: World, since: float, due_in: float) -> WakeLease:
    """The wake due ``due_in`` seconds after ``since`` (a ``time.monotonic()`` read
    before the call that set it), failing if it is handed out before then. A loaded
    machine may reach the first take after the due time: then a lease is right."""
    lease = await w.take_wake(lease=5)
    assert lease is None or time.monotonic() - since >= due_in, "delivered before due"
    if lease is None:
        await asyncio.sleep(due_in + 0.2)
        lease = await w.take_wake(lease=5)
    assert lease is not None, "a due wake was not delivered"
    return lease


async def test_world_protocol_shape(w: World) -> None:
    assert isinstance(w, World)
    assert isinstance(w.capabilities, frozenset)


async def test_w1_acquire_appends_fence_entry_and_grows_epoch(w: World) -> None:
    await w.append("s", [E("prompt", text="hi")])
    f1 = await w.acquire("s")
    f2 = await w.acquire("s")  # never waits for the previous holder
    assert isinstance(f1, Fence) and isinstance(f2, Fence)
    assert f1.session_id == "s" and f2.epoch > f1.epoch
    log = await w.read("s")
    assert [(e.seq, e.kind) for e in log] == [(1, "prompt"), (2, "fence"), (3, "fence")]
    assert f1.seq == 2 and f2.seq == 3
    assert log[1].data == {"epoch": f1.epoch} and log[1].epoch == f1.epoch
    assert log[2].data == {"epoch": f2.epoch} and log[2].epoch == f2.epoch
    with pytest.raises(Fenced):
        await w.append("s", [E()], fence=f1)


async def test_w1_reserved_fence_kinds_refused(w: World) -> None:
    await w.append("s", [E()])
    for kind in ["fence", "fence.taken", "fencepost", "fence2"]:
        with pytest.raises(InvalidEntry):
            await w.append("s", [NewEntry(kind, {"epoch": 99})])
        with pytest.raises(InvalidEntry):  # also inside a batch: nothing of it lands
            await w.append("s", [E("a"), NewEntry(kind, {})])
    assert [e.kind for e in await w.read("s")] == ["note"]


async def test_w2_stale_fence_refused_forever_writes_nothing(w: World) -> None:
    old = await w.acquire("s")
    assert await w.append("s", [E(n=1)], fence=old) == 2
    new = await w.acquire("s")
    before = await snapshot(w, "s")
    for _ in range(3):
        with pytest.raises(Fenced):
            await w.append("s", [E(n=2), E(n=3)], fence=old, wake=0)
    assert await snapshot(w, "s") == before
    assert await w.take_wake(lease=5) is None  # a refused append owes no wake (W7)
    assert await w.append("s", [E(n=4)], fence=new) == 4


async def test_w3_unfenced_append_between_fenced(w: World) -> None:
    f = await w.acquire("s")
    await w.append("s", [E(n=1)], fence=f)
    assert await w.append("s", [E("prompt")]) == 3
    await w.append("s", [E(n=2)], fence=f)  # the fence is still the newest
    log = await w.read("s")
    assert [e.epoch for e in log] == [f.epoch, f.epoch, None, f.epoch]


async def test_w4_batches_dense_atomic_not_interleaved(w: World) -> None:
    async def batch(i: int) -> int:
        return await w.append("s", [E(b=i, j=j) for j in range(5)])

    lasts = await asyncio.gather(*(batch(i) for i in range(8)))
    log = await w.read("s")
    assert [e.seq for e in log] == list(range(1, 41))
    assert sorted(lasts) == list(range(5, 41, 5))
    for last in lasts:
        chunk = log[last - 5 : last]
        assert len({e.data["b"] for e in chunk}) == 1
        assert [e.data["j"] for e in chunk] == list(range(5))
    e = log[0]
    assert isinstance(e, Entry) and e.session_id == "s" and e.kind == "note"
    assert isinstance(e.at, datetime) and e.at.utcoffset() == timedelta(0)


async def test_w5_expect(w: World) -> None:
    assert await w.append("s", [E()], expect=0) == 1
    with pytest.raises(Conflict) as info:
        await w.append("s", [E(), E()], expect=0)
    assert info.value.last == 1
    with pytest.raises(Conflict) as info:
        await w.append("s", [E()], expect=5)
    assert info.value.last == 1
    assert len(await w.read("s")) == 1
    assert await w.append("s", [E()], expect=1) == 2


async def test_w6_key_returns_landed_seq_even_with_stale_fence(w: World) -> None:
    f = await w.acquire("s")
    assert await w.append("s", [E(n=1), E(n=2)], fence=f, key="k1") == 3
    await w.acquire("s")
    assert await w.append("s", [E(n=1), E(n=2)], fence=f, key="k1") == 3
    assert await w.append("s", [E("prompt")], key="p") == 5
    assert await w.append("s", [E("prompt")], key="p") == 5
    assert len(await w.read("s")) == 5
    # a key belongs to its session
    assert await w.append("t", [E("prompt")], key="p") == 1


async def test_w7_append_with_wake(w: World) -> None:
    await w.append("s", [E("prompt")], wake=0)
    lease = await w.take_wake(lease=5)
    assert isinstance(lease, WakeLease) and lease.session_id == "s" and lease.attempt == 1
    await w.finish_wake(lease)
    with pytest.raises(Conflict):
        await w.append("s", [E()], expect=0, wake=0)
    assert await w.take_wake(lease=5) is None


async def test_w8_epochs_monotone(w: World) -> None:
    fences = [await w.acquire("s") for _ in range(3)]
    for f in fences:
        with contextlib.suppress(Fenced):
            await w.append("s", [E()], fence=f)
    epochs = [e.epoch for e in await w.read("s") if e.epoch is not None]
    assert epochs == sorted(epochs)


async def test_w9_read_after_limit_default_and_unknown(w: World) -> None:
    assert await w.read("never-written") == []
    await w.append("s", [E(i=i) for i in range(1005)])
    page = await w.read("s")
    assert len(page) == 1000 and page[0].seq == 1 and page[-1].seq == 1000
    assert [e.seq for e in await w.read("s", 1000)] == list(range(1001, 1006))
    assert [e.seq for e in await w.read("s", after=3, limit=2)] == [4, 5]
    assert await w.read("s", 1005) == []


async def test_w10_follow(w: World) -> None:
    await w.append("s", [E(i=1), E(i=2)])
    follower = w.follow("s")
    seen: list[int] = []

    async def consume() -> None:
        async for e in follower:
            seen.append(e.seq)
            if len(seen) == 4:
                return

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.2)
    await w.append("s", [E(i=3)])
    t0 = time.monotonic()
    await w.append("s", [E(i=4)])
    await asyncio.wait_for(task, 10)
    assert time.monotonic() - t0 < 5
    assert seen == [1, 2, 3, 4]
    await follower.aclose()  # type: ignore[attr-defined]
    again = w.follow("s", 2)  # reconnect with the last seq seen
    got = []
    async for e in again:
        got.append(e.seq)
        if len(got) == 2:
            break
    await again.aclose()  # type: ignore[attr-defined]
    assert got == [3, 4]


async def test_w11_wake_coalescing_and_due_time(w: World) -> None:
    await w.wake("s", delay=0.0)
    await w.wake("s", delay=60.0)  # keeps the earlier due time
    lease = await w.take_wake(lease=5)
    assert lease is not None and lease.session_id == "s"
    assert await w.take_wake(lease=5) is None  # one pending wake, one delivery
    await w.finish_wake(lease)  # both wake() calls came before the take: it is gone
    t0 = time.monotonic()
    await w.wake("t", delay=0.8)
    assert (await take_when_due(w, t0, 0.8)).session_id == "t"  # never before its due time


async def test_w11_later_earlier_wake_wins(w: World) -> None:
    await w.wake("s", delay=60.0)
    await w.wake("s")  # default delay 0: the earlier due time
    lease = await w.take_wake(lease=5)
    assert lease is not None and lease.session_id == "s"


async def test_w12_lease_expiry_redelivers_and_renew_fails(w: World) -> None:
    await w.wake("s")
    first = await w.take_wake(lease=1.5)
    assert first is not None and first.attempt == 1
    assert first.expires_at.utcoffset() == timedelta(0)
    assert await w.take_wake(lease=5) is None
    renewed = await w.renew_wake(first, lease=1.5)
    assert isinstance(renewed, WakeLease) and renewed.expires_at >= first.expires_at
    await asyncio.sleep(2.0)
    again = await w.take_wake(lease=5)
    assert again is not None and again.session_id == "s" and again.attempt == 2
    with pytest.raises(LeaseLost):
        await w.renew_wake(first, lease=5)
    await w.finish_wake(again)
    assert await w.take_wake(lease=5) is None


async def test_w13_finish_keeps_wake_that_arrived_meanwhile(w: World) -> None:
    await w.wake("s")
    lease = await w.take_wake(lease=5)
    assert lease is not None
    await w.wake("s")
    await w.finish_wake(lease)
    again = await w.take_wake(lease=5)
    assert again is not None and again.session_id == "s"
    await w.finish_wake(again)
    assert await w.take_wake(lease=5) is None


async def test_w14_delete(w: World) -> None:
    f = await w.acquire("s")
    await w.append("s", [E()], fence=f, key="k", wake=0)
    await w.delete("s")
    assert await w.read("s") == []
    assert await w.take_wake(lease=5) is None
    with pytest.raises(Fenced):
        await w.append("s", [E()], fence=f)
    assert await w.append("s", [E()], key="k") == 1  # the key went with the log
    f2 = await w.acquire("s")
    assert f2.epoch > f.epoch
    await w.delete("never-written")  # harmless


BAD_IDS = ["", "../x", "a b", "{x}", "x" * 129, "séance", "a/b", "a\x00b", "*"]


async def test_w15_bad_session_ids(w: World) -> None:
    await w.append("ok", [E()])
    calls = (
        lambda sid: w.append(sid, [E()]),
        lambda sid: w.read(sid),
        lambda sid: w.acquire(sid),
        lambda sid: w.wake(sid),
        lambda sid: w.delete(sid),
    )
    for sid in BAD_IDS:
        for call in calls:
            with pytest.raises(InvalidSessionId):
                await call(sid)
        with pytest.raises(InvalidSessionId):
            it = w.follow(sid)
            await it.__anext__()
    assert len(await w.read("ok")) == 1
    assert await w.take_wake(lease=5) is None


async def test_w15_good_edge_session_ids(w: World) -> None:
    for sid in ["a", "x" * 128, "A-Z.a_z:0-9"]:
        assert await w.append(sid, [E()]) == 1


BAD_ENTRIES = [
    NewEntry("", {}),
    NewEntry("k" * 65, {}),
    NewEntry("k", [1, 2]),  # type: ignore[arg-type]
    NewEntry("k", "text"),  # type: ignore[arg-type]
    NewEntry("k", {"x": float("nan")}),
    NewEntry("k", {"x": object()}),
]


async def test_w15_bad_entries_write_nothing(w: World) -> None:
    await w.append("s", [E()])
    for entry in BAD_ENTRIES:
        with pytest.raises(InvalidEntry):
            await w.append("s", [E(), entry], wake=0)
    assert len(await w.read("s")) == 1
    assert await w.take_wake(lease=5) is None


async def test_w15_kind_64_chars_ok(w: World) -> None:
    assert await w.append("s", [NewEntry("k" * 64, {})]) == 1


async def test_w15_entry_too_large_default_1mib(w: World) -> None:
    await w.append("s", [E(x="small")])
    big = NewEntry("k", {"x": "a" * (1024 * 1024 + 10)})
    with pytest.raises(EntryTooLarge) as info:
        await w.append("s", [E(), big])
    assert isinstance(info.value, ValueError) and isinstance(info.value, WorldError)
    assert len(await w.read("s")) == 1
    # just under the limit is fine
    assert await w.append("s", [NewEntry("k", {"x": "a" * (1024 * 1024 - 100)})]) == 2


async def test_w15_configured_size_by_url(tmp_path: object) -> None:
    for url in ["memory://?max_entry_bytes=100", f"sqlite:///{tmp_path}/m.db?max_entry_bytes=100"]:
        w = open_world(url)
        await w.setup()
        try:
            with pytest.raises(EntryTooLarge):
                await w.append("s", [NewEntry("k", {"x": "a" * 200})])
            assert await w.read("s") == []
        finally:
            await w.close()


async def test_w15_bad_id_before_any_io(tmp_path: object) -> None:
    # a world whose storage cannot even be opened still says InvalidSessionId first
    w = open_world("sqlite:////proc/no/such/dir/world.db")
    with pytest.raises(InvalidSessionId):
        await w.append("../etc", [E()])
    with pytest.raises(InvalidSessionId):
        await w.read("a b")


async def test_w17_capabilities_declared(world_url: str) -> None:
    w = open_world(world_url)
    caps = w.capabilities
    if world_url.startswith("memory"):
        assert "durable" not in caps and "shared" not in caps
    else:
        assert {"durable", "shared"} <= caps


async def test_w10_follow_stops_when_its_consumer_is_cancelled(w: World) -> None:
    # A consumer cancelled just as a new entry wakes its follower must stop (the
    # cancel must not be swallowed, e.g. by asyncio.wait_for on Python 3.11).
    for i in range(10):
        last = await w.append("s", [E(i=i)])

        async def consume(after: int) -> None:
            async for _ in w.follow("s", after):
                pass

        task = asyncio.ensure_future(consume(last if i % 2 else last + 10**6))
        await asyncio.sleep((0.0, 0.05, 0.01)[i % 3])
        await w.append("s", [E(wake=i)])
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=3.0)
        if not done:
            while not done:
                task.cancel()
                done, _ = await asyncio.wait({task}, timeout=0.1)
            pytest.fail(f"attempt {i}: the cancelled follow() consumer kept running")


async def test_w2_fence_never_handed_out_is_refused(w: World) -> None:
    # epochs start at 1: a made-up epoch-0 fence is not the session's newest fence
    with pytest.raises(Fenced):
        await w.append("fresh", [E()], fence=Fence("fresh", 0, 0), wake=0)
    assert await w.read("fresh") == []
    assert await w.take_wake(lease=5) is None
    f = await w.acquire("fresh")
    assert f.epoch >= 1
    with pytest.raises(Fenced):
        await w.append("fresh", [E()], fence=Fence("fresh", f.epoch + 1, f.seq))


async def test_w12_renew_after_expiry_raises_even_if_nobody_took_it(w: World) -> None:
    await w.wake("s")
    lease = await w.take_wake(lease=0.3)
    assert lease is not None
    await asyncio.sleep(0.6)
    with pytest.raises(LeaseLost):
        await w.renew_wake(lease, lease=5)
    again = await w.take_wake(lease=5)
    assert again is not None and again.attempt == lease.attempt + 1


async def test_w13_rewake_with_delay_is_kept_and_not_early(w: World) -> None:
    await w.wake("s")
    lease = await w.take_wake(lease=5)
    assert lease is not None
    t0 = time.monotonic()
    await w.wake("s", delay=0.7)
    await w.finish_wake(lease)
    again = await take_when_due(w, t0, 0.7)  # kept, but not before its due time
    assert again.session_id == "s"


async def test_w10_follow_sees_another_connections_appends(shared_world_url: str) -> None:
    reader, writer = open_world(shared_world_url), open_world(shared_world_url)
    await reader.setup()
    await writer.setup()
    follower = reader.follow("s")
    try:
        got: list[float] = []

        async def consume() -> None:
            async for _ in follower:
                got.append(time.monotonic())
                if len(got) == 3:
                    return

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.3)
        sent = []
        for i in range(3):
            sent.append(time.monotonic())
            await writer.append("s", [E(i=i)])
            await asyncio.sleep(0.2)
        await asyncio.wait_for(task, 15)
        # bounded delay: generous for a loaded machine, far below any "poll rarely" bug
        assert max(g - s for g, s in zip(got, sent, strict=True)) < 3.0
    finally:
        await follower.aclose()  # type: ignore[attr-defined]
        await reader.close()
        await writer.close()


async def test_w15_lease_with_a_bad_session_id(w: World) -> None:
    from datetime import UTC, datetime

    bad = WakeLease("../x", "token", 1, datetime.now(UTC))
    with pytest.raises(InvalidSessionId):
        await w.renew_wake(bad, lease=5)
    with pytest.raises(InvalidSessionId):
        await w.finish_wake(bad)
    with pytest.raises(ValueError):  # not a WakeLease at all: a typed argument error
        await w.finish_wake("s")  # type: ignore[arg-type]


async def test_w6_racing_retries_with_one_key_land_once(world_url: str) -> None:
    worlds = [open_world(world_url)]
    if not world_url.startswith("memory"):  # separate connections where the world has them
        worlds += [open_world(world_url) for _ in range(3)]
    for x in worlds:
        await x.setup()
    try:
        calls = [
            worlds[i % len(worlds)].append("s", [E(i=i), E(i=i)], key="same") for i in range(8)
        ]
        seqs = await asyncio.gather(*calls)
        assert set(seqs) == {2}
        assert len(await worlds[0].read("s")) == 2
    finally:
        for x in worlds:
            await x.close()


async def test_w1_racing_acquires_one_newest(world_url: str) -> None:
    worlds = [open_world(world_url)]
    if not world_url.startswith("memory"):
        worlds += [open_world(world_url) for _ in range(3)]
    for x in worlds:
        await x.setup()
    try:
        fences = await asyncio.gather(*(worlds[i % len(worlds)].acquire("s") for i in range(8)))
        epochs = [f.epoch for f in fences]
        assert len(set(epochs)) == 8
        assert sorted(f.seq for f in fences) == list(range(1, 9))
        newest = max(fences, key=lambda f: f.epoch)
        for f in fences:
            if f is newest:
                assert await worlds[0].append("s", [E()], fence=f) == 9
            else:
                with pytest.raises(Fenced):
                    await worlds[1 % len(worlds)].append("s", [E()], fence=f)
        log = await worlds[0].read("s")
        fence_epochs = [e.data["epoch"] for e in log if e.kind == "fence"]
        assert fence_epochs == sorted(fence_epochs)  # W8: along the log
    finally:
        for x in worlds:
            await x.close()


async def test_w4_stored_entries_never_change_through_callers_objects(w: World) -> None:
    data = {"list": [1, 2], "nested": {"a": "b"}}
    await w.append("s", [NewEntry("k", data)])
    data["list"].append(3)  # the caller reuses its dict
    got = await w.read("s")
    got[0].data["nested"]["a"] = "changed"  # the caller edits what it read
    assert (await w.read("s"))[0].data == {"list": [1, 2], "nested": {"a": "b"}}


@pytest.mark.parametrize("suffix", ["tenant-a", "Env_Prod-2"])
async def test_namespaces_with_hyphens_and_case_isolate(world_url: str, suffix: str) -> None:
    """A namespace such as ``tenant-a`` works on every backend (quoted where it
    becomes an identifier) and shares nothing with its neighbour ``tenant-b``."""
    base = world_url.split("?")[0] if "namespace=" in world_url else world_url
    sep = "&" if "?" in base else "?"
    tag = uuid.uuid4().hex[:6]
    a = open_world(f"{base}{sep}namespace={suffix}{tag}")
    b = open_world(f"{base}{sep}namespace={suffix}{tag}-b")
    await a.setup()
    await b.setup()
    try:
        follower = a.follow("s")
        await a.append("s", [NewEntry("k", {"n": 1})], wake=0)
        first = await asyncio.wait_for(anext(follower), timeout=10)
        assert (first.seq, first.data) == (1, {"n": 1})
        await follower.aclose()
        assert await b.read("s") == []
        assert await b.take_wake(lease=5) is None
        assert (await b.acquire("s")).seq == 1
        assert [e.kind for e in await a.read("s")] == ["k"]
    finally:
        await a.close()
        await b.close()
