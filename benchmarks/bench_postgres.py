"""PostgresWorld throughput and latency beside the same server's raw INSERT rate.

Prints a table (nothing is asserted). Every figure is measured in the same run on
the same server as its baseline: an asyncpg loop of single-row INSERTs with the same
concurrency (one connection per task), so the ratio says what fxworld costs over
the cheapest durable write the server can do. Each figure is the median of
``--rounds`` rounds, each round measuring the baseline just before the figure
(the disk's fsync rate drifts; see ``_measure.py``).

    python benchmarks/bench_postgres.py                 # a throwaway local server (fsync on)
    python benchmarks/bench_postgres.py --url postgresql://user@host/db
    python benchmarks/bench_postgres.py --seconds 5

Rows: appends/s with 1 and 8 sessions; batches of 10 entries; 8 sessions that are
all followed (appends to followed sessions are pushed by NOTIFY, coalesced per
writing world); follow latency p50/p99 (append call to follower yield, another
world); wakes taken and finished per second with 8 workers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
import uuid
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import Rows, follow_latency, pct, timed

from fxworld import NewEntry
from fxworld_postgres import PostgresWorld

PAYLOAD = {"role": "assistant", "text": "x" * 200, "n": 1}


async def raw_insert_rate(url: str, workers: int, seconds: float) -> float:
    conns = [await asyncpg.connect(url) for _ in range(workers)]
    table = f"bench_raw_{uuid.uuid4().hex[:8]}"
    await conns[0].execute(
        f"CREATE TABLE {table} (session_id text, seq bigint, kind text, data jsonb, "
        "at timestamptz DEFAULT now(), PRIMARY KEY (session_id, seq))"
    )
    counters = [0] * workers
    data = json.dumps(PAYLOAD)
    sql = f"INSERT INTO {table} (session_id, seq, kind, data) VALUES ($1, $2, $3, $4::jsonb)"

    async def step(k: int) -> int:
        counters[k] += 1
        await conns[k].execute(sql, f"s{k}", counters[k], "message", data)
        return 1

    try:
        await timed(workers, 0.3, step)  # warm up
        return await timed(workers, seconds, step)
    finally:
        await conns[0].execute(f"DROP TABLE {table}")
        for c in conns:
            await c.close()


async def raw_insert_latency(url: str, n: int) -> list[float]:
    conn = await asyncpg.connect(url)
    table = f"bench_lat_{uuid.uuid4().hex[:8]}"
    await conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, data jsonb)")
    out = []
    try:
        for i in range(n):
            t = time.perf_counter()
            await conn.execute(
                f"INSERT INTO {table} VALUES ($1, $2::jsonb)", i, json.dumps(PAYLOAD)
            )
            out.append(time.perf_counter() - t)
    finally:
        await conn.execute(f"DROP TABLE {table}")
        await conn.close()
    return out


async def world_append_rate(
    url: str, workers: int, seconds: float, *, batch: int = 1, followed: bool = False
) -> float:
    ns = "bench_" + uuid.uuid4().hex[:8]
    world = PostgresWorld(url, namespace=ns, pool_size=max(workers, 2))
    await world.setup()
    entries = [NewEntry("message", PAYLOAD)] * batch
    streams = []
    tasks = []
    if followed:
        follower = PostgresWorld(url, namespace=ns)
        for k in range(workers):
            stream = follower.follow(f"s{k}")
            streams.append(stream)

            async def drain(it=stream) -> None:  # type: ignore[no-untyped-def]
                async for _ in it:
                    pass

            tasks.append(asyncio.create_task(drain()))
        await asyncio.sleep(1.0)  # let the followers register

    async def step(k: int) -> int:
        await world.append(f"s{k}", entries)
        return batch

    try:
        await timed(workers, 0.3, step)
        return await timed(workers, seconds, step)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if followed:
            await follower.close()
        await world.close()


async def wake_rate(url: str, workers: int, count: int) -> float:
    ns = "bench_" + uuid.uuid4().hex[:8]
    world = PostgresWorld(url, namespace=ns, pool_size=workers)
    await world.setup()
    await asyncio.gather(*(world.wake(f"s{i}") for i in range(count)))
    handled = 0

    async def worker() -> None:
        nonlocal handled
        while (lease := await world.take_wake(lease=30)) is not None:
            await world.finish_wake(lease)
            handled += 1

    try:
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(workers)))
        elapsed = time.perf_counter() - start
        assert handled == count, (handled, count)
        return handled / elapsed
    finally:
        await world.close()


async def main(url: str, seconds: float, rounds: int) -> None:
    table = Rows(rounds, lambda workers: raw_insert_rate(url, workers, seconds))
    row = table.add

    print(f"measuring, {rounds} rounds of {seconds:g} s each ...", flush=True)
    await row("append, 1 session", "/s", lambda: world_append_rate(url, 1, seconds), 1)
    await row("append, 8 sessions", "/s", lambda: world_append_rate(url, 8, seconds), 8)
    await row(
        "append, 8 sessions, batches of 10 (entries)",
        "entries/s",
        lambda: world_append_rate(url, 8, seconds, batch=10),
        8,
    )
    await row(
        "append, 8 sessions, all followed",
        "/s",
        lambda: world_append_rate(url, 8, seconds, followed=True),
        8,
    )
    await row("wakes taken + finished, 8 workers", "/s", lambda: wake_rate(url, 8, 2000))
    ns = "bench_" + uuid.uuid4().hex[:8]
    writer, follower = PostgresWorld(url, namespace=ns), PostgresWorld(url, namespace=ns)
    lat = await follow_latency(writer, follower, 400)
    raw_lat = await raw_insert_latency(url, 400)
    print()
    print(f"{'measure':48} {'PostgresWorld':>20} {'raw INSERT':>14} {'ratio':>7}")
    print("-" * 92)
    for name, value, raw, ratio in table.rows:
        print(f"{name:48} {value:>20} {raw:>14} {ratio:>7}")
    print(
        f"{'follow latency p50 / p99 (append -> yield)':48} "
        f"{pct(lat, 50):>8.2f} / {pct(lat, 99):.2f} ms "
        f"{pct(raw_lat, 50):>5.2f} / {pct(raw_lat, 99):.2f} ms (INSERT commit)"
    )
    print(
        "\nratio = PostgresWorld / raw single-row INSERT rate on the same server, same "
        f"concurrency: the median over {rounds} rounds of the baseline measured just "
        f"before the figure; {seconds:g} s per measure"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="an existing server (default: a throwaway local one)")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure (median)")
    parser.add_argument("--no-fsync", action="store_true", help="throwaway server without fsync")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop our server when killed
    server = None
    url = args.url
    if url is None:
        from tests.support.postgres_server import start_postgres

        server = start_postgres(fsync=not args.no_fsync)
        url = server.url
    try:
        asyncio.run(main(url, args.seconds, args.rounds))
    finally:
        if server is not None:
            server.stop()
