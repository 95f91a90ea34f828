"""Large values: one entry of 1, 10 and 32 MiB written and read through each world,
beside the store's own cheapest write and read of as many bytes, in the same run.

Prints a table (nothing is asserted). The baselines: PostgreSQL one ``INSERT`` of a
``bytea`` and its ``SELECT``; Redis one ``SET`` and ``GET``; S3 one ``PutObject`` and
``GetObject``; SQLite one ``INSERT`` of a BLOB (committed) and its ``SELECT``. Each
round times the raw write and read, then the world's ``append`` of one entry holding
the value and its ``read``, alternately; the medians of ``--rounds`` rounds are shown
with their ratios. Peak memory is what Python allocated (``tracemalloc``) during one
more append and read, as a multiple of the value's size: for a write, beyond the
value the caller holds (add 1 for the worker's whole need); for a read, the value
returned included. In brackets, the same for the raw write and read (the store's
client alone).

    python benchmarks/bench_large_values.py                    # throwaway local servers
    python benchmarks/bench_large_values.py --worlds sqlite,postgres --sizes 1,10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fxworld import NewEntry, World, open_world

MiB = 1024 * 1024
Op = Callable[[], Awaitable[object]]


@dataclass
class Raw:
    """The store's own write and read of ``n`` bytes (a fresh key each write)."""

    write: Callable[[bytes], Awaitable[object]]
    read: Op
    close: Op


async def _clock(op: Op) -> float:
    t = time.perf_counter()
    await op()
    return time.perf_counter() - t


async def _peak(op: Op) -> int:
    tracemalloc.start()
    try:
        await op()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# -- the stores' own operations ---------------------------------------------------------


async def _raw_postgres(url: str) -> Raw:
    import asyncpg

    conn = await asyncpg.connect(url)
    table = f"bench_{uuid.uuid4().hex[:8]}"
    await conn.execute(f"CREATE TABLE {table} (k serial PRIMARY KEY, v bytea NOT NULL)")
    last: list[int] = [0]

    async def write(value: bytes) -> None:
        last[0] = await conn.fetchval(f"INSERT INTO {table} (v) VALUES ($1) RETURNING k", value)

    async def read() -> bytes:
        return bytes(await conn.fetchval(f"SELECT v FROM {table} WHERE k = $1", last[0]))

    async def close() -> None:
        await conn.execute(f"DROP TABLE {table}")
        await conn.close()

    return Raw(write, read, close)


async def _raw_redis(url: str) -> Raw:
    import redis.asyncio as aredis

    client = aredis.Redis.from_url(url.split("?")[0])
    key = f"bench:{uuid.uuid4().hex}"

    async def write(value: bytes) -> None:
        await client.set(key, value)

    async def read() -> bytes:
        got = await client.get(key)
        return got if isinstance(got, bytes) else b""

    async def close() -> None:
        await client.delete(key)
        await client.aclose()

    return Raw(write, read, close)


async def _raw_s3(endpoint: str) -> Raw:
    from aiobotocore.session import get_session

    stack = contextlib.AsyncExitStack()
    client = await stack.enter_async_context(
        get_session().create_client("s3", endpoint_url=endpoint, region_name="us-east-1")
    )
    with contextlib.suppress(Exception):
        await client.create_bucket(Bucket="fxworld-bench")
    key = [f"raw/{uuid.uuid4().hex}"]

    async def write(value: bytes) -> None:
        key[0] = f"raw/{uuid.uuid4().hex}"
        await client.put_object(Bucket="fxworld-bench", Key=key[0], Body=value, IfNoneMatch="*")

    async def read() -> bytes:
        got = await client.get_object(Bucket="fxworld-bench", Key=key[0])
        async with got["Body"] as body:
            return bytes(await body.read())

    async def close() -> None:
        await stack.aclose()

    return Raw(write, read, close)


async def _raw_sqlite(path: Path) -> Raw:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=wal")
    conn.execute("PRAGMA synchronous=normal")  # as SqliteWorld's default
    conn.execute("CREATE TABLE IF NOT EXISTS raw (k INTEGER PRIMARY KEY, v BLOB NOT NULL)")
    last: list[int] = [0]

    async def write(value: bytes) -> None:
        def run() -> None:
            last[0] = int(conn.execute("INSERT INTO raw (v) VALUES (?)", (value,)).lastrowid or 0)

        await asyncio.to_thread(run)

    async def read() -> bytes:
        def run() -> bytes:
            return bytes(conn.execute("SELECT v FROM raw WHERE k = ?", (last[0],)).fetchone()[0])

        return await asyncio.to_thread(run)

    async def close() -> None:
        conn.close()

    return Raw(write, read, close)


# -- the servers ---------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _place(kind: str, tmp: Path) -> AsyncIterator[tuple[World, Raw]]:
    """The world of ``kind`` on a throwaway local server, and the server's raw ops."""
    server: object = None
    try:
        if kind == "sqlite":
            url, raw = f"sqlite:///{tmp / 'w.db'}", await _raw_sqlite(tmp / "raw.db")
        elif kind == "postgres":
            from tests.support.postgres_server import start_postgres

            server = start_postgres()
            url = f"{server.url}?namespace=bench_{uuid.uuid4().hex[:8]}"
            raw = await _raw_postgres(server.url)
        elif kind == "redis":
            from tests.support.redis_server import start_redis

            server = start_redis()  # appendonly, appendfsync always
            url = f"{server.url}?namespace=bench{uuid.uuid4().hex[:8]}"
            raw = await _raw_redis(server.url)
        elif kind == "s3":
            from tests.support.s3_server import start_s3

            server = start_s3()
            url = server.url(bucket="fxworld-bench", namespace=f"b{uuid.uuid4().hex[:8]}")
            raw = await _raw_s3(server.endpoint)
        else:
            raise SystemExit(f"unknown world {kind!r}: sqlite, postgres, redis or s3")
        world = open_world(url)
        await world.setup()
        try:
            yield world, raw
        finally:
            await world.close()
            await raw.close()
    finally:
        stop = getattr(server, "stop", None)
        if stop is not None:
            stop()


# -- the measurement ----------------------------------------------------------------


async def _one(kind: str, world: World, raw: Raw, mib: int, rounds: int) -> str:
    """One row: the medians of ``rounds`` raw and world writes and reads of ``mib`` MiB."""
    n = mib * MiB
    data = {"x": "v" * (n - 8)}  # n bytes of JSON
    blob = b"v" * n
    sid = f"big-{mib}"
    times: dict[str, list[float]] = {"rw": [], "rr": [], "ww": [], "wr": []}
    last = [0]

    async def append() -> None:
        last[0] = await world.append(sid, [NewEntry("big", data)])

    async def read() -> None:
        got = await world.read(sid, last[0] - 1, limit=1)
        assert len(got[0].data["x"]) == n - 8

    for _ in range(rounds):
        times["rw"].append(await _clock(lambda: raw.write(blob)))
        times["rr"].append(await _clock(raw.read))
        times["ww"].append(await _clock(append))
        times["wr"].append(await _clock(read))
    peak_w = await _peak(append)
    peak_r = await _peak(read)
    raw_w = await _peak(lambda: raw.write(blob))
    raw_r = await _peak(raw.read)
    await world.delete(sid)
    m = {k: statistics.median(v) * 1000 for k, v in times.items()}
    return (
        f"{kind:<9} {mib:>4} MiB | write {m['ww']:8.1f} ms vs raw {m['rw']:8.1f}"
        f" = {m['ww'] / m['rw']:5.2f}x | read {m['wr']:8.1f} ms vs raw"
        f" {m['rr']:8.1f} = {m['wr'] / m['rr']:5.2f}x | peak write"
        f" {peak_w / n:4.1f}x read {peak_r / n:4.1f}x (raw {raw_w / n:3.1f}x, {raw_r / n:3.1f}x)"
    )


async def _measure(kind: str, sizes: list[int], rounds: int) -> list[str]:
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with _place(kind, Path(tmp)) as (world, raw):
            for mib in sizes:
                rows.append(await _one(kind, world, raw, mib, rounds))
                print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default="sqlite,postgres,redis,s3")
    parser.add_argument("--sizes", default="1,10,32", help="MiB, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop our servers when killed
    sizes = [int(s) for s in args.sizes.split(",")]
    print("world       size | write: world vs the store's own | read: the same | peak memory")
    for kind in args.worlds.split(","):
        asyncio.run(_measure(kind, sizes, args.rounds))


if __name__ == "__main__":
    main()
