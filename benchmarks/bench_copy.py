"""The copy rate, SQLite -> PostgreSQL, beside the same server's raw INSERT rate.

Prints figures (nothing is asserted). A SQLite world is filled with ``--entries``
entries (default 100,000) in ``--sessions`` sessions, each a prompt, then takeovers
each followed by fenced entries of about 200 bytes, like a turn's steps. Then
:func:`fxworld.moving.copy_session` copies every session into a fresh PostgreSQL
namespace, one session after another, as ``fxworld copy`` does. The yardstick,
measured on the same server in the same run: the same number of rows INSERTed
with asyncpg on one connection, in transactions of as many rows as the copy
appends per call (``BATCH_ENTRIES``), and single-row INSERTs (one commit each).

    python benchmarks/bench_copy.py                  # a throwaway local server (fsync on)
    python benchmarks/bench_copy.py --url postgresql://user@host/db --entries 20000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fxworld import NewEntry, SqliteWorld
from fxworld.moving import copy_session
from fxworld.moving.replicate import BATCH_ENTRIES
from fxworld_postgres import PostgresWorld

PAYLOAD = {"v": 1, "call": "c", "text": "x" * 180}
STEPS = 99  # fenced entries after each takeover


async def fill(path: Path, sessions: int, entries: int) -> list[str]:
    """``sessions`` sessions holding ``entries`` entries in all."""
    world = SqliteWorld(path)
    ids = [f"s{n:05d}" for n in range(sessions)]
    try:
        for sid in ids:
            left = entries // sessions - 1
            await world.append(sid, [NewEntry("prompt", {"v": 1, "text": "go", "key": sid})])
            while left > 0:
                fence = await world.acquire(sid)
                n = min(STEPS, left - 1)
                if n > 0:
                    await world.append(sid, [NewEntry("text", PAYLOAD)] * n, fence=fence)
                left -= n + 1
    finally:
        await world.close()
    return ids


async def copy_rate(source: Path, url: str, ids: list[str]) -> tuple[float, int]:
    src = SqliteWorld(source)
    dst = PostgresWorld(url, namespace="bench_" + uuid.uuid4().hex[:8])
    await dst.setup()
    try:
        start, total = time.perf_counter(), 0
        for sid in ids:
            total += (await copy_session(src, dst, sid)).written
        return total / (time.perf_counter() - start), total
    finally:
        await src.close()
        await dst.close()


async def raw_rates(url: str, rows: int, seconds: float) -> tuple[float, float]:
    """(batched INSERT rows/s, single-row INSERT rows/s) on one connection."""
    conn = await asyncpg.connect(url)
    table = f"bench_raw_{uuid.uuid4().hex[:8]}"
    await conn.execute(
        f"CREATE TABLE {table} (session_id text, seq bigint, kind text, data jsonb, "
        "epoch bigint, at timestamptz DEFAULT now(), PRIMARY KEY (session_id, seq))"
    )
    sql = f"INSERT INTO {table} (session_id, seq, kind, data, epoch) VALUES ($1, $2, $3, $4, $5)"
    data = json.dumps(PAYLOAD)
    try:
        start = time.perf_counter()
        for first in range(0, rows, BATCH_ENTRIES):
            batch = [
                ("b", s, "text", data, 1) for s in range(first, min(rows, first + BATCH_ENTRIES))
            ]
            async with conn.transaction():
                await conn.executemany(sql, batch)
        batched = rows / (time.perf_counter() - start)
        start, n = time.perf_counter(), 0
        while time.perf_counter() - start < seconds:
            n += 1
            await conn.execute(sql, "one", n, "text", data, 1)
        return batched, n / (time.perf_counter() - start)
    finally:
        await conn.execute(f"DROP TABLE {table}")
        await conn.close()


async def main(url: str, sessions: int, entries: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        print(f"filling SQLite with {entries} entries in {sessions} sessions ...", flush=True)
        ids = await fill(Path(tmp) / "source.db", sessions, entries)
        print("copying to PostgreSQL ...", flush=True)
        rate, copied = await copy_rate(Path(tmp) / "source.db", url, ids)
    batched, single = await raw_rates(url, copied, 3.0)
    load = os.getloadavg()[0]
    print()
    print(f"{'measure':52} {'entries/s':>10} {'ratio':>7}")
    print("-" * 71)
    print(f"{'fxworld copy, SQLite -> PostgreSQL (' + str(copied) + ' entries)':52} {rate:>10.0f}")
    print(f"{f'raw INSERT, {BATCH_ENTRIES} rows per transaction, 1 connection':52} "
          f"{batched:>10.0f} {rate / batched:>7.2f}")  # fmt: skip
    print(f"{'raw INSERT, one row per commit, 1 connection':52} {single:>10.0f} "
          f"{rate / single:>7.2f}")  # fmt: skip
    print(f"\nratio = copy rate / raw rate on the same server in this run; load average {load:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", help="an existing server (default: a throwaway local one)")
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=100)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop our server when killed
    server = None
    url = args.url
    if url is None:
        from tests.support.postgres_server import start_postgres

        server = start_postgres()
        url = server.url
    try:
        asyncio.run(main(url, args.sessions, args.entries))
    finally:
        if server is not None:
            server.stop()
