"""Benchmark the embedded SQLite world on a temporary file; prints, never asserts.

    python benchmarks/bench_sqlite.py [--seconds 2] [--processes 4]

Prints single-entry appends/s and batch appends/s from 1 and N processes and
reads/s (the table of ``fxworld bench``), the same single-entry figure with
``synchronous=full``, and how long ``follow()`` takes to deliver an entry
committed by another connection. The target for the embedded world is at least
2,000 single-entry appends/s from one process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fxworld import NewEntry, SqliteWorld
from fxworld.commands.bench import format_table, run_bench

TARGET = 2000.0


async def follow_latency(path: Path, samples: int = 40) -> list[float]:
    """Seconds from an append's commit (in one world object) to its delivery by
    follow() in another: the cross-connection path (PRAGMA data_version)."""
    writer, reader = SqliteWorld(path, namespace="latency"), SqliteWorld(path, namespace="latency")
    await writer.setup()
    delays: list[float] = []
    it = reader.follow("s")
    try:
        for i in range(samples):
            nxt = asyncio.ensure_future(anext(it))
            await asyncio.sleep(0.03)
            await writer.append("s", [NewEntry("tick", {"i": i})])
            entry = await asyncio.wait_for(nxt, 10)
            delays.append(time.time() - entry.at.timestamp())
    finally:
        await it.aclose()  # type: ignore[attr-defined]
        await writer.close()
        await reader.close()
    return delays


async def cpu_per_append(path: Path, n: int = 3000) -> float:
    """CPU seconds (all threads, user + system) one single-entry append costs this
    process: unlike appends/s, hardly affected by other load on the machine."""
    world = SqliteWorld(path, namespace="cpu")
    await world.setup()
    entry = [NewEntry("bench", {"text": "x" * 64, "i": 0})]
    for _ in range(100):  # warm up
        await world.append("s", entry)
    before = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(n):
        await world.append("s", entry)
    after = resource.getrusage(resource.RUSAGE_SELF)
    await world.close()
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used / n


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--processes", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fxworld-bench-") as tmp:
        path = Path(tmp) / "world.db"
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(
            f"SqliteWorld on {path} ({args.seconds:g} s per figure, {os.cpu_count()} CPUs, "
            f"load average {load:.1f}, Python {sys.version.split()[0]})\n"
        )
        rows = await run_bench(
            f"sqlite:///{path}", seconds=args.seconds, processes=sorted({1, args.processes})
        )
        print(format_table(rows))
        full = await run_bench(
            f"sqlite:///{path}?synchronous=full", seconds=args.seconds, processes=(1,)
        )
        single_full = next(r for r in full if r.mode == "single")
        print(
            f"{'single-entry, sync=full':<28}  {'1 process':>12}  "
            f"{single_full.ops_per_second:>10,.0f}  {single_full.entries_per_second:>10,.0f}"
        )
        single = next(r for r in rows if r.mode == "single" and r.workers == 1)
        verdict = "met" if single.ops_per_second >= TARGET else "NOT met"
        print(
            f"\nsingle-entry appends/s from one process: {single.ops_per_second:,.0f} "
            f"(target {TARGET:,.0f}: {verdict}, x{single.ops_per_second / TARGET:.2f})"
        )
        cpu = await cpu_per_append(path)
        print(
            f"CPU per single-entry append: {cpu * 1e6:.0f} us (all threads), so about "
            f"{1 / cpu:,.0f} appends/s from one process on otherwise idle cores"
        )
        delays = sorted(await follow_latency(path))
        p95 = delays[int(len(delays) * 0.95) - 1]
        print(
            f"follow() delivery from another connection: median "
            f"{statistics.median(delays) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
            f"max {delays[-1] * 1000:.0f} ms (bound: 100 ms)"
        )


if __name__ == "__main__":
    asyncio.run(main())
