"""Large values on every world (docs/large-values.md): an entry of tens of MiB is
saved whole in one append and read back whole through ``read`` and ``follow``;
``delete`` removes its bytes from the store; a fenced-out writer's large append
writes nothing; a writer SIGKILLed while it appends one leaves all of it or none.

Each world is a real server (or file); the bytes a world keeps are counted on the
store itself (rows, keys, objects), not through the world."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import boto3
import pytest
import redis

from fxworld import EncryptedWorld, MemoryWorld, NewEntry, World, open_world
from fxworld.errors import EntryTooLarge, Fenced
from fxworld.follow import bounded_follow
from fxworld.protocol import IdleDeleter, LastEntryReader, NamespaceDropper
from fxworld.validate import DEFAULT_MAX_ENTRY_BYTES
from tests.support.namespaces import fresh_namespace, set_up
from tests.support.postgres_server import PostgresServer
from tests.support.redis_server import RedisCluster, RedisServer
from tests.support.s3_server import S3Server

MiB = 1024 * 1024
BIG = 32 * MiB  # the value of the round trip and of the SIGKILL check
LARGE = 4 * MiB  # over the old 1 MiB limit and every world's inline threshold
WORLDS = ["memory", "sqlite", "postgres", "pgbouncer", "redis", "cluster", "s3", "encrypted"]
KEYS = ",".join(f"{n}:{base64.b64encode(bytes([i + 1]) * 32).decode()}" for i, n in enumerate("ab"))


@dataclass
class Place:
    """A world under test: how to open it (here and in a child process) and how
    many bytes of entry data its store holds."""

    open: Callable[[], World]
    stored: Callable[[], int] | None  # None: the store cannot be looked at (memory)
    url: str | None  # None: a child process cannot open it
    encrypted: bool = False


def _threaded(coro: Callable[[], object]) -> int:
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return int(pool.submit(asyncio.run, coro()).result())  # type: ignore[arg-type]


def _postgres(server: PostgresServer, url: str) -> Place:
    ns = url.split("namespace=")[1].split("&")[0]

    async def stored() -> int:
        conn = await asyncpg.connect(server.url)
        try:
            return int(
                await conn.fetchval(
                    "SELECT coalesce(sum(octet_length(coalesce(raw, data::text))), 0) "
                    f'FROM "fxworld_{ns}".entries'
                )
            )
        except asyncpg.UndefinedTableError:  # the namespace was dropped
            return 0
        finally:
            await conn.close()

    return Place(lambda: open_world(url), lambda: _threaded(stored), url)


def _redis(url: str, nodes: list[RedisServer]) -> Place:
    ns = url.split("namespace=")[1].split("&")[0]

    def stored() -> int:
        total = 0
        for node in nodes:
            client = redis.Redis(host=node.host, port=node.port, password=node.password or None)
            for key in client.scan_iter(match=f"fxworld:{{{ns}*"):
                total += int(client.memory_usage(key, samples=0) or 0)
            client.close()
        return total

    return Place(lambda: open_world(url), stored, url)


def _s3(server: S3Server) -> Place:
    ns = fresh_namespace("big")
    url = set_up(server.url(namespace=ns))
    client = boto3.client("s3", endpoint_url=server.endpoint)

    def stored() -> int:
        pages = client.get_paginator("list_objects_v2").paginate(
            Bucket="fxworld-test", Prefix=f"{ns}/"
        )
        return sum(o["Size"] for page in pages for o in page.get("Contents", []))

    return Place(lambda: open_world(url), stored, url)


def _sqlite(path: Path, *, encrypted: bool = False) -> Place:
    url = f"sqlite:///{path}"

    def stored() -> int:
        with contextlib.closing(sqlite3.connect(path)) as conn:
            row = conn.execute(
                "SELECT (SELECT coalesce(sum(length(data)), 0) FROM fx_entries)"
                " + (SELECT coalesce(sum(length(data)), 0) FROM fx_values)"
            ).fetchone()
            return int(row[0])

    if encrypted:
        return Place(lambda: EncryptedWorld.from_env(open_world(url)), stored, url, True)
    return Place(lambda: open_world(url), stored, url)


@pytest.fixture(params=WORLDS)
def place(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Place:
    kind = request.param
    monkeypatch.setenv("FXWORLD_ENCRYPTION_KEYS", KEYS)
    if kind == "memory":
        return Place(MemoryWorld, None, None)
    if kind in ("sqlite", "encrypted"):
        return _sqlite(tmp_path / "w.db", encrypted=kind == "encrypted")
    if kind == "postgres":
        return _postgres(
            request.getfixturevalue("postgres_server"), request.getfixturevalue("pg_url")
        )
    if kind == "pgbouncer":
        return _postgres(
            request.getfixturevalue("postgres_server"), request.getfixturevalue("pgbouncer_url")
        )
    if kind == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        return _redis(request.getfixturevalue("redis_url"), [server])
    if kind == "cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        sep = "&" if "?" in cluster.url else "?"
        url = set_up(f"{cluster.url}{sep}namespace={fresh_namespace('big')}")
        return _redis(url, list(cluster.nodes))
    return _s3(request.getfixturevalue("s3_server"))


@pytest.fixture
async def world(place: Place) -> AsyncIterator[World]:
    w = place.open()
    await w.setup()
    yield w
    await w.close()


def _value(size: int, tag: str = "v") -> dict[str, object]:
    """Entry data of ``size`` bytes of JSON, with quotes and non-ASCII text in it."""
    head = {"tag": tag, "text": 'a "quoted" line, é and 🙂\n', "x": ""}
    room = size - len(str(head).encode()) - 64
    return {**head, "x": ("0123456789abcdef" * (room // 16 + 1))[:room]}


async def test_the_default_limit_is_64_mib_and_over_it_is_entry_too_large(world: World) -> None:
    limit = world.max_entry_bytes  # type: ignore[attr-defined]
    if isinstance(world, EncryptedWorld):  # the seal of the plaintext fits the inner world's
        assert 44 * MiB < limit < DEFAULT_MAX_ENTRY_BYTES
    else:
        assert limit == DEFAULT_MAX_ENTRY_BYTES == 64 * MiB
    with pytest.raises(EntryTooLarge) as info:
        await world.append("s", [NewEntry("big", {"x": "y" * limit})])
    assert (info.value.limit, info.value.size) == (limit, limit + len('{"x":""}'))
    assert await world.read("s") == []


async def test_a_32_mib_value_round_trips_through_append_read_and_follow(world: World) -> None:
    value = _value(BIG)
    fence = await world.acquire("s")
    small = NewEntry("note", {"i": 1})
    seq = await world.append("s", [small, NewEntry("big", value), small], fence=fence)
    assert seq == 4  # dense positions: the large value is one entry
    got = await world.read("s")
    assert [(e.seq, e.kind) for e in got] == [(1, "fence"), (2, "note"), (3, "big"), (4, "note")]
    assert got[2].data == value and got[2].epoch == fence.epoch
    assert [e.data for e in await world.read("s", 2, limit=1)] == [value]

    later = _value(LARGE, "later")
    expected = [e.data for e in got] + [later]

    async def followed() -> list[int]:
        seen = []
        async for entry in world.follow("s", 1):
            assert entry.data == expected[entry.seq - 1]
            seen.append(entry.seq)
            if entry.seq == 5:
                return seen
        return seen

    task = asyncio.create_task(followed())
    assert await world.append("s", [NewEntry("big", later)], fence=fence) == 5
    assert await asyncio.wait_for(task, 60) == [2, 3, 4, 5]

    streamed = []  # as the engine's stream and the HTTP stream read it: a bounded page
    async for entry in bounded_follow(world, "s", 1):
        streamed.append((entry.seq, entry.data))
        if entry.seq == 5:
            break
    assert streamed == [(seq, expected[seq - 1]) for seq in range(2, 6)]


async def test_delete_removes_the_large_value_from_the_store(world: World, place: Place) -> None:
    for i in range(3):
        await world.append("s", [NewEntry("big", _value(LARGE, str(i)))])
    await world.append("other", [NewEntry("note", {"keep": True})])
    if place.stored is not None:
        assert place.stored() >= 3 * LARGE * 0.9
    await world.delete("s")
    assert await world.read("s") == []
    assert [e.data for e in await world.read("other")] == [{"keep": True}]
    if place.stored is not None:
        assert place.stored() < LARGE // 4  # what is left: the other session's small entry


async def test_prune_and_drop_namespace_remove_large_values(world: World, place: Place) -> None:
    seq = await world.append("idle", [NewEntry("big", _value(LARGE, "idle"))])
    await world.append("kept", [NewEntry("big", _value(LARGE, "kept"))])
    assert isinstance(world, IdleDeleter) and isinstance(world, NamespaceDropper)
    assert await world.delete_if_idle("idle", last=seq)  # what fxworld.prune calls
    assert await world.read("idle") == []
    assert len(await world.read("kept")) == 1
    if place.stored is not None:
        sealed = 4 / 3 if place.encrypted else 1  # base64 of the ciphertext
        assert 0.9 * LARGE <= place.stored() < 1.25 * LARGE * sealed  # only the kept one
    await world.drop_namespace()
    if place.stored is not None:
        assert place.stored() < LARGE // 4


async def test_a_fenced_out_writers_large_append_writes_nothing(world: World, place: Place) -> None:
    old = await world.acquire("s")
    await world.append("s", [NewEntry("note", {"i": 1})], fence=old)
    new = await world.acquire("s")
    before = place.stored() if place.stored is not None else 0
    for _ in range(2):  # and stays refused
        with pytest.raises(Fenced):
            await world.append("s", [NewEntry("big", _value(LARGE))], fence=old, wake=0)
    assert [e.kind for e in await world.read("s")] == ["fence", "note", "fence"]
    if place.stored is not None:
        assert place.stored() - before < LARGE // 4
    assert await world.append("s", [NewEntry("big", _value(LARGE))], fence=new) == 4


async def test_large_values_among_many_small_appends_are_stored_once_and_read_back(
    world: World, place: Place
) -> None:
    # enough appends for a world that compacts its log (S3) to do so: a large value
    # is not copied into the compacted objects, and is read back from a fresh world
    fence = await world.acquire("s")
    large = {5: _value(LARGE, "a"), 23: _value(LARGE, "b"), 32: _value(LARGE, "c")}
    for i in range(2, 33):  # 32 positions: two compactions (S3), the last one large
        data = large.get(i, {"i": i})
        assert await world.append("s", [NewEntry("e", data)], fence=fence) == i
    if place.url is not None:  # a world that shares its store: read it from a fresh one
        await world.close()
        world = place.open()
    try:
        got = await world.read("s")
        assert [e.seq for e in got] == list(range(1, 33))
        assert all(e.data == large.get(e.seq, {"i": e.seq}) for e in got[1:])
        assert [e.data for e in await world.read("s", 22, limit=1)] == [large[23]]
        if isinstance(world, LastEntryReader):
            last = await world.last_entry("s")
            assert last is not None and (last.seq, last.data) == (32, large[32])
    finally:
        await world.close()
    if place.stored is not None:
        assert place.stored() < 1.5 * 3 * LARGE  # each large value is kept once


_REPO = str(Path(__file__).resolve().parents[2])
_CHILD = """
import asyncio, sys, time
from fxworld import EncryptedWorld, NewEntry, open_world

async def main(url, encrypted, size):
    world = open_world(url)
    if encrypted == "1":
        world = EncryptedWorld.from_env(world)
    await world.setup()
    fence = await world.acquire("k")
    n = 0
    while True:
        n += 1
        data = {"n": n, "x": str(n % 10) * size}
        print("try", n, time.monotonic(), flush=True)
        seq = await world.append("k", [NewEntry("big", data)], fence=fence)
        print("ok", n, seq, time.monotonic(), flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


@pytest.mark.parametrize(  # a memory world is not shared with another process
    "place", [kind for kind in WORLDS if kind != "memory"], indirect=True
)
async def test_a_writer_killed_while_it_appends_a_large_value_leaves_all_or_nothing(
    place: Place,
) -> None:
    assert place.url is not None
    args = [sys.executable, "-c", _CHILD, place.url, "1" if place.encrypted else "0", str(BIG)]
    env = {**os.environ, "PYTHONPATH": _REPO}  # the keys and credentials the test set
    child = subprocess.Popen(args, stdout=subprocess.PIPE, env=env, text=True)  # noqa: ASYNC220
    assert child.stdout is not None
    acked, tried, took = 0, 0, 0.0
    started = time.monotonic()
    try:
        while True:  # kill it halfway through its second (or later) large append
            line = await asyncio.to_thread(child.stdout.readline)
            assert line, f"the writer ended early ({child.wait()})"
            word, n, *rest = line.split()
            if word == "ok":
                acked = int(n)
                took = float(rest[-1]) - started
            else:
                tried, started = int(n), float(rest[-1])
                if acked:
                    await asyncio.sleep(took / 2)
                    break
    finally:
        child.kill()
        child.wait()
        rest = child.stdout.read().split("\n")  # what it said before the kill landed
        child.stdout.close()
    for word, n, *_ in (x.split() for x in rest if x):
        tried, acked = max(tried, int(n)), int(n) if word == "ok" else acked
    w = place.open()
    try:
        entries = [e for e in await w.read("k") if e.kind == "big"]
        # every acknowledged value is there, the one in flight whole or not at all
        assert acked <= len(entries) <= tried
        for e in entries:
            k = int(e.data["n"])
            assert e.data == {"n": k, "x": str(k % 10) * BIG}
    finally:
        await w.close()


async def test_a_32_mib_value_is_copied_exported_and_imported_whole(tmp_path: Path) -> None:
    from fxworld.moving import check_file, copy_session, export_sessions, import_file

    value = _value(BIG, "moved")
    source = open_world(f"sqlite:///{tmp_path / 'a.db'}")
    copied = open_world(f"sqlite:///{tmp_path / 'b.db'}")
    imported = MemoryWorld()
    for w in (source, copied, imported):
        await w.setup()
    try:
        fence = await source.acquire("s")
        await source.append("s", [NewEntry("note", {"i": 1}), NewEntry("big", value)], fence=fence)
        want = [(e.seq, e.kind, e.data) for e in await source.read("s")]
        await copy_session(source, copied, "s")
        assert [(e.seq, e.kind, e.data) for e in await copied.read("s")] == want
        path = tmp_path / "export.jsonl"
        with path.open("w") as out:
            await export_sessions(source, ["s"], out)
        await import_file(imported, path, checked=check_file(path))
        assert [(e.seq, e.kind, e.data) for e in await imported.read("s")] == want
    finally:
        for w in (source, copied, imported):
            await w.close()


def _bytes_read() -> int:
    """The bytes this process has read through read(2) and pread(2), all threads."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="reads /proc/self/io (Linux)")
async def test_sqlite_small_appends_after_a_large_value_do_not_read_it_again(
    tmp_path: Path,
) -> None:
    """A session that holds a large value takes small appends and reads at the cost
    of small ones: SQLite does not read the large value again for each of them (it
    did, whole, for every append to its session after it)."""
    world = open_world(f"sqlite:///{tmp_path / 'w.db'}")
    try:
        await world.append("s", [NewEntry("big", {"x": "v" * LARGE})])
        before = _bytes_read()
        for i in range(5):
            await world.append("s", [NewEntry("small", {"i": i})])
        assert [e.data["i"] for e in await world.read("s", 1)] == list(range(5))
        assert _bytes_read() - before < LARGE
        assert len((await world.read("s", 0, limit=1))[0].data["x"]) == LARGE
    finally:
        await world.close()


async def test_an_encrypted_world_takes_values_up_to_its_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over a default inner world (64 MiB) an EncryptedWorld takes 48 MiB less its
    envelope: the sealed form is base64 (4/3) of the ciphertext. A value at that
    limit round-trips; one byte more is EntryTooLarge, and nothing is written."""
    monkeypatch.setenv("FXWORLD_ENCRYPTION_KEYS", KEYS)
    w = EncryptedWorld.from_env(open_world(f"sqlite:///{tmp_path / 'w.db'}"))
    try:
        limit = w.max_entry_bytes
        assert 48 * MiB - 200 < limit < 48 * MiB
        data = {"x": "v" * (limit - 8)}  # {"x":"..."}: 8 bytes around the text
        with pytest.raises(EntryTooLarge):
            await w.append("s", [NewEntry("big", {"x": "v" * (limit - 7)})])
        assert await w.append("s", [NewEntry("big", data)]) == 1
        (got,) = await w.read("s")
        assert got.data == data
    finally:
        await w.close()
