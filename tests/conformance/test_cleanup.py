"""A kit run leaves nothing in the storage it tested: counted on real servers
(PostgreSQL schemas, Redis keys on one server and on a Cluster, S3 objects) before
and after a passing run, a run with a failing check, and a real Ctrl-C (SIGINT) to
a real ``fxworld conformance`` process in the middle of its process tier, with its
child processes writing. ``--keep`` keeps them and says where they are; a world
without ``drop_namespace()`` still runs, and the kit says what it left.

The runs select a check or two (``--select``): what removes a namespace is the
same for every check (``fxworld_conformance.cleanup``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import boto3
import pytest
import redis

from fxworld import NewEntry, SqliteWorld, open_world
from fxworld.cli import main
from fxworld.protocol import NamespaceDropper
from fxworld_conformance import Target, run_kit
from fxworld_conformance.cleanup import LeftBehind
from fxworld_conformance.target import with_namespace
from tests.support.postgres_server import PostgresServer
from tests.support.redis_server import RedisCluster, RedisServer
from tests.support.s3_server import S3Server
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
KIT = "fxk_"
"""How every namespace the kit makes begins (docs/conformance.md)."""


@dataclass
class Storage:
    """A server the kit is pointed at, and what the kit has in it."""

    url: str
    count: Callable[[], int]
    """Kit schemas (PostgreSQL), keys (Redis) or objects (S3) on the server."""
    entries: Callable[[], int]
    """What of that holds entries: log rows, log streams, batch objects."""


_SCHEMAS = "SELECT nspname FROM pg_namespace WHERE nspname LIKE $1"


def _postgres(server: PostgresServer) -> Storage:
    pattern = f"fxworld_{KIT}%".replace("_", r"\_")

    async def schemas(rows: bool) -> int:
        conn = await asyncpg.connect(server.url)
        try:
            names = [r[0] for r in await conn.fetch(_SCHEMAS, pattern)]
            if not rows:
                return len(names)
            found = 0
            for name in names:
                with contextlib.suppress(asyncpg.PostgresError):  # dropped meanwhile
                    found += await conn.fetchval(f'SELECT count(*) FROM "{name}".entries')
            return found
        finally:
            await conn.close()

    def run(rows: bool) -> int:  # also from a test's running event loop
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, schemas(rows)).result()

    return Storage(server.url, lambda: run(False), lambda: run(True))


def _redis(url: str, nodes: list[RedisServer]) -> Storage:
    def keys(pattern: str) -> int:
        found = 0
        for node in nodes:
            client = redis.Redis(host=node.host, port=node.port, password=node.password or None)
            found += sum(1 for _ in client.scan_iter(match=pattern))
            client.close()
        return found

    return Storage(
        url,
        lambda: keys(f"fxworld:{{{KIT}*"),
        lambda: keys(f"fxworld:{{{KIT}*}}:l:*"),
    )


def _s3(server: S3Server) -> Storage:
    prefix = f"kitclean-{uuid.uuid4().hex[:8]}/"  # this test's own corner of the bucket
    client = boto3.client("s3", endpoint_url=server.endpoint)
    with contextlib.suppress(client.exceptions.ClientError):  # there already
        client.create_bucket(Bucket="fxworld-test")

    def objects() -> list[str]:
        pages = client.get_paginator("list_objects_v2").paginate(
            Bucket="fxworld-test", Prefix=prefix
        )
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    return Storage(
        server.url(prefix=prefix),
        lambda: len(objects()),
        lambda: sum("/b/" in key for key in objects()),
    )


def _sqlite(path: Path) -> Storage:
    def rows(tables: tuple[str, ...]) -> int:
        if not path.exists():
            return 0
        with contextlib.closing(sqlite3.connect(path)) as conn:
            like = f"{KIT}%"
            return sum(
                conn.execute(
                    f"SELECT count(*) FROM {t} WHERE namespace LIKE ?", (like,)
                ).fetchone()[0]
                for t in tables
            )

    return Storage(
        f"sqlite:///{path}",
        lambda: rows(("fx_sessions", "fx_entries", "fx_keys", "fx_wakes")),
        lambda: rows(("fx_entries",)),
    )


@pytest.fixture(params=["sqlite", "postgres", "redis", "redis-cluster", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "sqlite":
        return _sqlite(tmp_path / "world.db")
    if request.param == "postgres":
        return _postgres(request.getfixturevalue("postgres_server"))
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        return _redis(server.url, [server])
    if request.param == "redis-cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        return _redis(cluster.url, list(cluster.nodes))
    return _s3(request.getfixturevalue("s3_server"))


def _kit(url: str, *args: str) -> list[str]:
    """``fxworld conformance`` against ``url`` with the quick profile."""
    return ["conformance", "--world", url, "--profile", "quick", *args]


def _with(url: str, option: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{option}"


def test_a_passing_run_leaves_nothing(storage: Storage, capsys: pytest.CaptureFixture[str]) -> None:
    before = storage.count()
    rc = main(_kit(storage.url, "--select", "w05-expect,w06-key", "-q"))
    out = capsys.readouterr().out
    assert storage.count() == before, out
    assert rc == 0, out
    assert "removed 3 namespace(s) the kit made" in out  # the first look, one per check


def test_a_run_with_a_failing_check_leaves_nothing(
    storage: Storage, capsys: pytest.CaptureFixture[str]
) -> None:
    before = storage.count()
    # entries over 64 bytes are refused: the round trip of JSON fails W4, after the
    # dense batches (small entries) passed and wrote their data
    small = _with(storage.url, "max_entry_bytes=64")
    rc = main(_kit(small, "--select", "w04-dense-batches,w04-round-trip", "-q"))
    out = capsys.readouterr().out
    assert storage.count() == before, out
    assert rc == 1, out
    assert "--- FAILED W4 stored data is exactly what was given" in out
    assert "removed 3 namespace(s) the kit made" in out


def test_keep_keeps_the_namespaces_and_says_where(
    storage: Storage, capsys: pytest.CaptureFixture[str]
) -> None:
    before = storage.count()
    rc = main(_kit(storage.url, "--select", "w05-expect", "--keep", "-q"))
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "kept for debugging (--keep): 1" in out
    [kept] = re.findall(r"^  (\S+namespace=fxk_[0-9a-f]{16}\S*)$", out, re.M)
    assert storage.count() > before  # the check's data, where the line says
    assert "***" in kept or "@" not in kept  # a password is masked

    async def drop() -> None:  # what a user does once done looking
        world = open_world(kept.replace("***", _password(storage.url)))
        assert isinstance(world, NamespaceDropper)
        await world.drop_namespace()
        await world.close()

    asyncio.run(drop())
    assert storage.count() == before


def _password(url: str) -> str:
    found = re.search(r"://[^:/@]*:([^@]*)@", url)
    return found.group(1) if found else ""


@pytest.mark.parametrize("storage", ["postgres", "redis", "s3"], indirect=True)
def test_ctrl_c_in_the_process_tier_leaves_nothing(storage: Storage, tmp_path: Path) -> None:
    before, written = storage.count(), storage.entries()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fxworld", *_kit(storage.url, "--select", "processes")],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # where the tier keeps its records
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # Ctrl-C as in a terminal: a shell without job control starts background jobs
        # (a CI script's `&`) with SIGINT ignored, and the CLI would inherit that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        # the child processes are writing: the workload's namespace has entries
        asyncio.run(wait_until(lambda: storage.entries() > written, 120, every=0.2))
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert storage.count() == before, out
    assert not list(tmp_path.glob("fxk-procs-*"))  # nor its records
    assert proc.returncode == 130, out
    assert "interrupted (Ctrl-C)" in out and "removed 2 namespace(s) the kit made" in out
    assert "Traceback" not in out, out


def test_drop_namespace_removes_its_namespace_and_nothing_else(storage: Storage) -> None:
    """The backends' ``drop_namespace()``, which the kit removes its namespaces with:
    a namespace whose name starts with the dropped one's keeps everything, and a
    namespace never set up is dropped without being made."""
    before = storage.count()
    name = f"{KIT}{uuid.uuid4().hex[:12]}"
    dropped, kept, never = (with_namespace(storage.url, n) for n in (name, name + "x", name + "y"))

    async def scenario() -> None:
        for url in (dropped, kept):
            world = open_world(url)
            await world.setup()
            fence = await world.acquire("s")
            await world.append("s", [NewEntry("k", {"url": url[-4:]})], fence=fence, key="k")
            await world.wake("s")
            await world.close()
        for url in (dropped, never):
            world = open_world(url)
            assert isinstance(world, NamespaceDropper)
            await world.drop_namespace()
            await world.drop_namespace()  # again: nothing left, no error
            await world.close()
        other = open_world(kept)
        assert [e.kind for e in await other.read("s")] == ["fence", "k"]
        lease = await other.take_wake(lease=5)
        assert lease is not None and lease.session_id == "s"
        assert await other.append("s", [NewEntry("k", {})], key="k") == 2  # its key too
        await other.drop_namespace()
        await other.close()

    assert storage.count() == before
    asyncio.run(scenario())
    assert storage.count() == before


class NoDropWorld:
    """A third-party world without ``drop_namespace()``: a SQLite world of its own
    namespace (``fxk_...``, so the counts see it), the file from the environment."""

    def __init__(self) -> None:
        path = os.environ["FXWORLD_TEST_NO_DROP_DB"]
        self.inner = SqliteWorld(path, namespace=f"{KIT}{uuid.uuid4().hex[:16]}")

    def __getattr__(self, name: str) -> Any:
        if name == "drop_namespace":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(namespace={self.inner.namespace!r})"


def test_a_world_without_drop_namespace_runs_and_the_kit_says_what_it_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = _sqlite(tmp_path / "world.db")
    monkeypatch.setenv("FXWORLD_TEST_NO_DROP_DB", str(tmp_path / "world.db"))
    # from code: warned once per world class, each one left named in target.left
    world_class = type(f"NoDrop{uuid.uuid4().hex[:6]}", (NoDropWorld,), {})
    target = Target(factory=world_class)
    with pytest.warns(LeftBehind) as warned:
        for _ in range(2):
            results = run_kit(target, profile="quick", select=["w05-expect", "w06-key"])
            assert [r.status for r in results] == ["passed", "passed"]
    [warning] = [w for w in warned if issubclass(w.category, LeftBehind)]
    assert f"{world_class.__name__} has no drop_namespace()" in str(warning.message)
    assert len(target.left) == 4 and storage.entries() > 0
    assert all(world_class.__name__ in str(left) for left in target.left)
    # from the CLI: it says so at the end
    rc = main(_kit(f"{__name__}:NoDropWorld", "--select", "w05-expect", "-q"))
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "left behind: 2 namespace(s) the kit made" in out  # the first look, the check
    assert "NoDropWorld(namespace='fxk_" in out and "has no drop_namespace()" in out
