"""SqliteWorld keeps every guarantee W1-W19 (the kit's subclass), plus what only a file can show:
durability across reopening, sharing between world objects, URL parsing."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from fxworld import NewEntry, SqliteWorld, open_world, take_wakes
from fxworld.errors import BackendUnavailable, ConfigurationError, Fenced, InvalidArgument
from fxworld_conformance import Target, WorldSuite


class TestSqliteWorld(WorldSuite):
    """The whole kit, the process tier included (OS processes share one file),
    and the example tests of every guarantee."""

    @pytest.fixture
    def fxworld_target(self, tmp_path: Path) -> Target:
        return Target(url=f"sqlite:///{tmp_path}/world.db")


def e(**data: object) -> NewEntry:
    return NewEntry("msg", dict(data))


async def test_acknowledged_writes_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "world.db"
    w1 = SqliteWorld(path)
    f = await w1.acquire("s")
    await w1.append("s", [e(n=1), e(n=2)], fence=f, key="k", wake=0)
    await w1.close()
    w2 = SqliteWorld(path)
    try:
        assert [x.data for x in await w2.read("s")] == [{"epoch": f.epoch}, {"n": 1}, {"n": 2}]
        assert await w2.append("s", [e(n=9)], key="k") == 3  # the key survived
        lease = await w2.take_wake(lease=5)  # the wake survived
        assert lease is not None and lease.session_id == "s"
        f2 = await w2.acquire("s")  # and the epoch
        assert f2.epoch > f.epoch
    finally:
        await w2.close()


async def test_two_world_objects_on_one_file_share_everything(tmp_path: Path) -> None:
    a, b = SqliteWorld(tmp_path / "w.db"), SqliteWorld(tmp_path / "w.db")
    try:
        fa = await a.acquire("s")
        fb = await b.acquire("s")
        with pytest.raises(Fenced):
            await a.append("s", [e()], fence=fa)
        # b's follower is woken by a's commit (PRAGMA data_version), not by b.
        it = b.follow("s", fb.seq)
        nxt = asyncio.ensure_future(asyncio.wait_for(anext(it), 10))
        await asyncio.sleep(0.05)
        await a.append("s", [e(n=1)])
        got = await nxt
        assert (got.seq, got.data) == (fb.seq + 1, {"n": 1})
        await it.aclose()  # type: ignore[attr-defined]
        await a.wake("s")
        lease = await b.take_wake(lease=5)
        assert lease is not None
        assert await a.take_wake(lease=5) is None
        await a.finish_wake(lease)
    finally:
        await a.close()
        await b.close()


async def test_namespaces_in_one_file_share_nothing(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    a, b = SqliteWorld(path, namespace="a"), SqliteWorld(path, namespace="b")
    try:
        fa = await a.acquire("s")
        await a.append("s", [e(n=1)], fence=fa, key="k", wake=0)
        assert await b.read("s") == []
        assert await b.take_wake(lease=5) is None
        assert await b.list_sessions() == []
        fb = await b.acquire("s")
        assert (fb.epoch, fb.seq) == (1, 1)  # epochs are not shared either
        assert await b.append("s", [e(n=2)], key="k") == 2  # nor keys
        await b.delete("s")
        assert len(await a.read("s")) == 2
        assert await a.append("s", [e(n=3)], fence=fa) == 3
        assert await a.list_sessions() == ["s"]
    finally:
        await a.close()
        await b.close()


def test_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    rel = open_world("sqlite:///data/w.db?namespace=t1")
    assert isinstance(rel, SqliteWorld)
    assert (rel.path, rel.namespace, rel.synchronous) == ("data/w.db", "t1", "normal")
    absolute = open_world(f"sqlite:///{tmp_path}/x/w.db?synchronous=full&busy_timeout=2.5")
    assert isinstance(absolute, SqliteWorld)
    assert absolute.path == f"{tmp_path}/x/w.db"
    assert (absolute.synchronous, absolute.busy_timeout) == ("full", 2.5)
    assert SqliteWorld.from_url("sqlite:////abs/w.db").path == "/abs/w.db"
    limited = SqliteWorld.from_url("sqlite:///w.db?max_entry_bytes=100")
    assert limited.max_entry_bytes == 100
    for bad in (
        "sqlite://host/w.db",
        "sqlite:///",
        "sqlite:///w.db?synchronous=off",
        "sqlite:///w.db?busy_timeout=soon",
        "sqlite:///w.db?nmespace=x",
        "sqlite:///:memory:",
    ):
        with pytest.raises(ConfigurationError):
            open_world(bad)
    with pytest.raises(InvalidArgument):
        open_world("sqlite:///w.db?namespace=no/slashes")
    with pytest.raises(ConfigurationError, match="busy_timeout"):
        open_world("sqlite:///w.db?busy_timeout=0")
    with pytest.raises(ConfigurationError, match="max_entry_bytes"):
        open_world("sqlite:///w.db?max_entry_bytes=0")
    assert "SqliteWorld('data/w.db', namespace='t1'" in repr(rel)
    assert "durable" in rel.capabilities and "shared" in rel.capabilities


async def test_full_sync_and_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "c" / "w.db"
    w = open_world(f"sqlite:///{path}?synchronous=full")
    try:
        await w.append("s", [e(n=1)])
    finally:
        await w.close()
    assert path.exists()
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        raw.close()
    w2 = SqliteWorld(path)
    try:
        assert len(await w2.read("s")) == 1
    finally:
        await w2.close()


async def test_locked_beyond_retries_is_backend_unavailable_and_loop_keeps_running(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.db"
    w = SqliteWorld(path, busy_timeout=0.3, retries=1)
    await w.append("s", [e(n=1)])
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    tick_task = asyncio.ensure_future(ticker())
    try:
        with pytest.raises(BackendUnavailable) as info:
            await w.append("s", [e(n=2)], key="k", wake=0)
        assert "locked" in str(info.value)
        assert not isinstance(info.value, sqlite3.Error)
        assert ticks >= 10  # the event loop ran while SQLite waited for the lock
        assert len(await w.read("s")) == 1  # readers are never blocked (WAL)
    finally:
        tick_task.cancel()
        raw.execute("ROLLBACK")
        raw.close()
    assert await w.append("s", [e(n=2)], key="k", wake=0) == 2  # nothing had landed
    assert await w.take_wake(lease=5) is not None
    await w.close()


async def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    path.write_bytes(b"this is not sqlite" * 100)
    w = SqliteWorld(path)
    with pytest.raises(ConfigurationError, match="not an fxworld SQLite database"):
        await w.setup()
    await w.close()
    assert path.read_bytes() == b"this is not sqlite" * 100


async def test_close_is_idempotent_and_the_world_reopens(tmp_path: Path) -> None:
    w = SqliteWorld(tmp_path / "w.db")
    await w.append("s", [e()])
    await w.close()
    await w.close()
    assert len(await w.read("s")) == 1
    await w.close()


async def test_an_unusable_path_is_a_typed_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    w = SqliteWorld(blocker / "sub" / "w.db")  # its parent cannot be created
    with pytest.raises(BackendUnavailable) as info:
        await w.append("s", [e()])
    assert type(info.value) is BackendUnavailable  # not a FileExistsError or sqlite3 error
    assert "a-file" in str(info.value)
    await w.close()
    assert blocker.read_text() == "not a directory"


async def test_take_wakes_takes_the_earliest_due_first(tmp_path: Path) -> None:
    w = SqliteWorld(tmp_path / "world.db")
    try:
        for sid in ("c", "a", "d", "b"):  # due in this order, not in the order of their names
            await w.wake(sid)
            await asyncio.sleep(0.002)
        first = await take_wakes(w, lease=30, limit=2)
        assert sorted(x.session_id for x in first) == ["a", "c"]
        assert sorted(x.session_id for x in await take_wakes(w, lease=30, limit=5)) == ["b", "d"]
    finally:
        await w.close()


async def test_batches_from_two_world_objects_on_one_file_share_no_wake(tmp_path: Path) -> None:
    """Each batch is one write transaction: two connections taking batches at once
    never both take a session (W12), and every due wake is taken (W13)."""
    path = tmp_path / "world.db"
    a, b = SqliteWorld(path), SqliteWorld(path)
    try:
        sessions = sorted(f"s{i:02}" for i in range(40))
        for sid in sessions:
            await a.wake(sid)
        batches = await asyncio.gather(*(take_wakes(w, lease=30, limit=3) for w in (a, b) * 8))
        rest = await take_wakes(b, lease=30, limit=1000)
        taken = sorted(x.session_id for batch in [*batches, rest] for x in batch)
        assert taken == sessions
    finally:
        await a.close()
        await b.close()


async def test_a_write_wakes_only_its_own_sessions_followers(tmp_path: Path) -> None:
    """100 idle followers of 100 sessions: 20 appends to one session, through this
    world and through another world object on the file, make that session's
    followers read, not all 100 (each woke and read on every commit: 300 idle
    followers made an append 50x slower). The followers still see the entries."""
    path = tmp_path / "w.db"
    w, other = SqliteWorld(path), SqliteWorld(path)
    await w.setup()
    sessions = [f"f-{i}" for i in range(100)]
    for sid in sessions:
        await w.append(sid, [NewEntry("m", {})])
    seen: dict[str, list[int]] = {sid: [] for sid in sessions}

    async def follow(sid: str) -> None:
        async for entry in w.follow(sid):
            seen[sid].append(entry.seq)

    tasks = [asyncio.create_task(follow(sid)) for sid in sessions]
    try:
        await _until(lambda: all(seen.values()))
        reads = 0
        read = w.read

        async def counted(*args: object, **kwargs: object) -> object:
            nonlocal reads
            reads += 1
            return await read(*args, **kwargs)  # type: ignore[arg-type]

        w.read = counted  # type: ignore[method-assign]
        for writer in (w, other):
            reads = 0
            for _ in range(20):
                await writer.append("f-7", [NewEntry("m", {})])
            await _until(lambda: len(seen["f-7"]) == (21 if writer is w else 41))  # noqa: B023
            # the session's follower: at most one read a write; the others, at most
            # one read each of their own once-a-second safety net
            assert reads <= 20 + len(sessions), (writer is w, reads)
        assert seen["f-7"] == list(range(1, 42))
        assert all(seen[sid] == [1] for sid in sessions if sid != "f-7")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await w.close()
        await other.close()


async def _until(done: Callable[[], bool], within: float = 10.0) -> None:
    for _ in range(int(within / 0.01)):
        if done():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not within 10 s")


async def test_a_file_of_schema_1_is_upgraded_and_keeps_its_entries(tmp_path: Path) -> None:
    """A file written before large values moved out of the entries table (schema 1)
    opens read-only with a clear error, is upgraded by a read-write open, keeps its
    entries, and takes a large value that delete removes again."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # the tables as schema 1 made them
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(
            "CREATE TABLE fx_sessions (namespace TEXT NOT NULL, session_id TEXT NOT NULL,"
            " last_seq INTEGER NOT NULL, epoch INTEGER NOT NULL,"
            " PRIMARY KEY (namespace, session_id)) WITHOUT ROWID"
        )
        conn.execute(
            "CREATE TABLE fx_entries (namespace TEXT NOT NULL, session_id TEXT NOT NULL,"
            " seq INTEGER NOT NULL, kind TEXT NOT NULL, data TEXT NOT NULL, epoch INTEGER,"
            " at REAL NOT NULL, PRIMARY KEY (namespace, session_id, seq)) WITHOUT ROWID"
        )
        conn.execute("INSERT INTO fx_sessions VALUES ('default', 's', 1, 0)")
        conn.execute(
            "INSERT INTO fx_entries VALUES ('default', 's', 1, 'msg', '{\"n\":1}', NULL, 0)"
        )
        conn.execute("PRAGMA user_version = 1")
    conn.close()
    with pytest.raises(ConfigurationError, match="earlier fxworld"):
        await open_world(f"sqlite:///{path}?mode=ro").read("s")
    world = open_world(f"sqlite:///{path}")
    try:
        assert [en.data for en in await world.read("s")] == [{"n": 1}]
        big = "v" * (1024 * 1024)
        assert await world.append("s", [NewEntry("big", {"x": big})]) == 2
        assert (await world.read("s", 1))[0].data == {"x": big}
        await world.delete("s")
        assert await world.read("s") == []
    finally:
        await world.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT count(*) FROM fx_values").fetchone() == (0,)
        assert conn.execute("PRAGMA user_version").fetchone() == (2,)
