"""S3World throughput, read cost and follow delay beside the same server's raw PUTs.

Prints a table (nothing is asserted). Every figure is measured in the same run on
the same server as its baseline: a loop of raw ``PutObject`` with
``If-None-Match: *`` on fresh keys with the same concurrency, so the ratio says
what fxworld costs over the cheapest conditional write the server does.

    python benchmarks/bench_s3.py                      # a throwaway SeaweedFS weed mini
    python benchmarks/bench_s3.py --endpoint http://127.0.0.1:9000 --bucket b
    python benchmarks/bench_s3.py --seconds 5

Rows: appends/s with 1 and 8 sessions; reading a 1,000-entry session (requests
and ms) before and after compaction; wakes taken and finished per second (1 and
4 workers); follow delay p50/p99 (append return to follower yield, another world).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _measure import run_on_s3  # (this script's folder is on the path)

from fxworld import NewEntry
from fxworld_s3 import S3World

PAYLOAD = {"role": "assistant", "text": "x" * 200, "n": 1}


async def _rate(workers: int, seconds: float, step: Callable[[int], Awaitable[object]]) -> float:
    done = 0
    end = time.monotonic() + seconds

    async def run(k: int) -> None:
        nonlocal done
        while time.monotonic() < end:
            await step(k)
            done += 1

    started = time.monotonic()
    await asyncio.gather(*(run(k) for k in range(workers)))
    return done / (time.monotonic() - started)


def _world(args: argparse.Namespace, namespace: str) -> S3World:
    return S3World(args.bucket, endpoint_url=args.endpoint, namespace=namespace)


async def bench(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    w = _world(args, "bench_" + uuid.uuid4().hex[:8])
    await w.setup()
    raw_key = f"{w.keys.root}raw/"

    async def raw_put(k: int) -> None:
        await w.store.put_new(f"{raw_key}{uuid.uuid4().hex}", b'{"x":"' + b"x" * 200 + b'"}')

    for n in (1, 8):
        raw = await _rate(n, args.seconds, raw_put)
        sessions = [f"a{n}-{k}" for k in range(n)]
        fences = [await w.acquire(s) for s in sessions]

        async def append(k: int, sessions: list[str] = sessions, fences: list = fences) -> None:  # type: ignore[type-arg]
            await w.append(sessions[k], [NewEntry("step", PAYLOAD)], fence=fences[k])

        rate = await _rate(n, args.seconds, append)
        await w.logs.drain()
        rows.append(
            (f"fenced appends/s, {n} session(s)", f"{rate:,.0f}", f"{rate / raw:.2f}x raw PUT")
        )
        rows.append((f"raw If-None-Match PUTs/s, {n} task(s)", f"{raw:,.0f}", "baseline"))

    # a 1,000-entry session written without compaction, read by a fresh world
    sid = "read-1000"
    w.logs._compacting.add(sid)
    for i in range(0, 1000, 50):
        await asyncio.gather(*(w.append(sid, [NewEntry("e", {"i": j})]) for j in range(i, i + 50)))
    for label in ("before compaction", "after compaction"):
        reader = _world(args, w.namespace)
        reader.logs._compacting.add(sid)
        before, t0 = reader.store.requests, time.perf_counter()
        got = await reader.read(sid, limit=1000)
        ms = (time.perf_counter() - t0) * 1000
        assert len(got) == 1000
        rows.append(
            (
                f"read 1,000 entries, {label}",
                f"{ms:,.0f} ms",
                f"{reader.store.requests - before} requests",
            )
        )
        await reader.close()
        w.logs._compacting.discard(sid)
        st = await w.logs.state(sid)
        for _ in range(3):
            await w.logs.compact(sid, st)

    for workers in (1, 4):
        for i in range(400):
            await w.wake(f"wk{workers}-{i}")

        async def cycle(k: int) -> None:
            lease = await w.take_wake(lease=30)
            if lease is not None:
                await w.finish_wake(lease)

        rate = await _rate(workers, args.seconds, cycle)
        rows.append((f"wakes taken+finished/s, {workers} worker(s)", f"{rate:,.1f}", "400 queued"))

    follower = _world(args, w.namespace)
    stream = follower.follow("followed")
    delays: list[float] = []
    await w.append("followed", [NewEntry("first", {})])
    await asyncio.wait_for(anext(stream), 30)
    for i in range(args.follows):
        await asyncio.sleep(0.3)  # a quiet session between appends
        await w.append("followed", [NewEntry("e", {"i": i})])
        t0 = time.perf_counter()
        await asyncio.wait_for(anext(stream), 30)
        delays.append((time.perf_counter() - t0) * 1000)
    await stream.aclose()  # type: ignore[attr-defined]
    await follower.close()
    q = statistics.quantiles(delays, n=100)
    rows.append(
        ("follow delay p50 / p99", f"{q[49]:,.0f} / {q[98]:,.0f} ms", "poll hint, 50-400 ms")
    )
    await w.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", help="an S3 endpoint URL (default: a throwaway weed mini)")
    parser.add_argument("--bucket", default="fxworld-bench")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--follows", type=int, default=30)
    args = parser.parse_args()
    rows = run_on_s3(args, bench)
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>16}  {note}")


if __name__ == "__main__":
    main()
