"""S3World throughput, read cost and follow delay beside the same server's raw PUTs.

Prints a table (nothing is asserted). Every figure is measured in the same run on
the same server as its baseline: a loop of raw ``PutObject`` with
``If-None-Match: *`` on fresh keys with the same concurrency, so the ratio says
what fxworld costs over the cheapest conditional write the server does.

    python benchmarks/bench_s3.py                      # a throwaway SeaweedFS weed mini
    python benchmarks/bench_s3.py --endpoint http://127.0.0.1:9000 --bucket b
    python benchmarks/bench_s3.py --seconds 5
    python benchmarks/bench_s3.py --only wakes,follow

Rows (each rate paired, round by round, with raw PUTs just before it; the median
of ``--rounds`` rounds): appends/s with 1 and 8 sessions; an append with a wake,
in PUT latencies; reading a 1,000-entry session (requests and ms) before and after
compaction; wakes taken and finished per second with 1 and 8 workers, every round
from the same queue size, at 400 and 4,000 queued (a round stops once half the
queue is taken); follow delay p50/p99 from the
append's call to the yield of a follower already waiting (another world), beside
one PUT latency; the requests of one ``list_sessions`` page.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _measure import paired, pct, run_on_s3, timed  # (this script's folder is on the path)

from fxworld import NewEntry
from fxworld.protocol import SessionLister
from fxworld_s3 import S3World

PAYLOAD = {"role": "assistant", "text": "x" * 200, "n": 1}


async def _rate(workers: int, seconds: float, step: Callable[[int], Awaitable[object]]) -> float:
    async def one(k: int) -> int:
        await step(k)
        return 1

    return await timed(workers, seconds, one)


def _world(args: argparse.Namespace, namespace: str) -> S3World:
    return S3World(args.bucket, endpoint_url=args.endpoint, namespace=namespace)


Row = tuple[str, str, str]


async def bench(args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    w = _world(args, "bench_" + uuid.uuid4().hex[:8])
    await w.setup()
    raw_key = f"{w.keys.root}raw/"

    async def raw_put(k: int) -> None:
        await w.store.put_new(f"{raw_key}{uuid.uuid4().hex}", b'{"x":"' + b"x" * 200 + b'"}')

    def raw(n: int) -> Callable[[], Awaitable[float]]:
        return lambda: _rate(n, args.seconds, raw_put)

    parts = {
        "appends": lambda: _appends(args, w, raw),
        "reads": lambda: _read_1000(args, w),
        "wakes": lambda: _wakes(args, w, raw),
        "follow": lambda: _follow(args, w, raw),
        "listing": lambda: _listing(args, w),
    }
    for name, part in parts.items():
        if name in args.only:
            gc.collect()  # no row pays a full collection of what the set-up or a row before left
            rows += await part()
    await w.close()
    return rows


async def _appends(
    args: argparse.Namespace, w: S3World, raw: Callable[[int], Callable[[], Awaitable[float]]]
) -> list[Row]:
    rows: list[Row] = []
    for n in (1, 8):
        sessions = [f"a{n}-{k}" for k in range(n)]
        fences = [await w.acquire(s) for s in sessions]

        async def append(k: int, sessions: list[str] = sessions, fences: list = fences) -> None:  # type: ignore[type-arg]
            await w.append(sessions[k], [NewEntry("step", PAYLOAD)], fence=fences[k])

        m = await paired(args.rounds, raw(n), lambda n=n, a=append: _rate(n, args.seconds, a))  # type: ignore[misc]
        await w.logs.drain()
        rows.append(
            (
                f"fenced appends/s, {n} session(s)",
                f"{m.value:,.0f}",
                f"{m.ratio:.2f}x raw PUT ({m.raw:,.0f}/s)",
            )
        )

    async def with_wake(k: int) -> None:
        await w.append("woken", [NewEntry("step", PAYLOAD)], wake=3600)

    m = await paired(args.rounds, raw(1), lambda: _rate(1, args.seconds, with_wake))
    await w.logs.drain()
    rows.append(
        (
            "append with wake, latency",
            f"{1000 / m.value:,.1f} ms",
            f"{m.raw / m.value:.2f} PUT latencies ({1000 / m.raw:,.1f} ms)",
        )
    )
    return rows


async def _read_1000(args: argparse.Namespace, w: S3World) -> list[Row]:
    """A 1,000-entry session written without compaction, read by a fresh world."""
    rows: list[Row] = []
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
        for _ in range(4):
            await w.logs.compact(sid, st)
    return rows


async def _wakes(
    args: argparse.Namespace, w: S3World, raw: Callable[[int], Callable[[], Awaitable[float]]]
) -> list[Row]:
    """Wakes taken and finished. Every round starts from the same queue size (topped
    up with fresh sessions after each round) and ends after ``--seconds`` or once
    half the queue is taken, so the queue never runs dry; only takes that got a
    wake count."""
    rows: list[Row] = []
    for queued in (400, 4000):
        q = _world(args, f"{w.namespace}-q{queued}")
        made = 0

        async def top_up(n: int, q: S3World = q) -> None:
            nonlocal made
            for i in range(0, n, 50):
                batch = range(made + i, made + min(n, i + 50))
                await asyncio.gather(*(q.wake(f"wk-{j}") for j in batch))
            made += n

        await top_up(queued)
        for workers in (1, 8):

            async def rate(workers: int = workers, q: S3World = q, queued: int = queued) -> float:
                taken = 0
                stop = time.perf_counter() + args.seconds

                async def worker() -> None:
                    nonlocal taken
                    while time.perf_counter() < stop and taken < queued // 2:
                        lease = await q.take_wake(lease=30)
                        if lease is not None:
                            await q.finish_wake(lease)
                            taken += 1

                start = time.perf_counter()
                await asyncio.gather(*(worker() for _ in range(workers)))
                took = time.perf_counter() - start
                await top_up(taken)  # the next round starts from `queued` again
                return taken / took

            m = await paired(args.rounds, raw(8), rate)
            rows.append(
                (
                    f"wakes taken+finished/s, {workers} worker(s), {queued:,} queued",
                    f"{m.value:,.1f}",
                    f"{m.ratio:.2f}x raw PUT at 8 ({m.raw:,.0f}/s)",
                )
            )
        await q.close()
    return rows


async def _follow(
    args: argparse.Namespace, w: S3World, raw: Callable[[int], Callable[[], Awaitable[float]]]
) -> list[Row]:
    """From the append's call to the yield of a follower already waiting (another world)."""
    put = 1000 / await raw(1)()  # first: the session is not quiet for seconds (poll backoff)
    follower = _world(args, w.namespace)
    stream = follower.follow("followed")
    delays: list[float] = []
    await w.append("followed", [NewEntry("first", {})])
    await asyncio.wait_for(anext(stream), 30)
    gc.collect()  # the follower's new client is set-up (a long-running one made it once)
    for i in range(args.follows):
        waiting = asyncio.ensure_future(anext(stream))
        # a quiet session between appends (the follower waits), of a random length:
        # a fixed one would land every append at the same point of the poll period
        await asyncio.sleep(0.3 + random.random() * 0.1)
        t0 = time.perf_counter()
        await w.append("followed", [NewEntry("e", {"i": i})])
        await asyncio.wait_for(waiting, 30)
        delays.append((time.perf_counter() - t0) * 1000)
    await stream.aclose()  # type: ignore[attr-defined]
    await follower.close()
    p50, p99 = pct([d / 1000 for d in delays], 50), pct([d / 1000 for d in delays], 99)
    return [
        (
            "follow delay p50 / p99, follower waiting",
            f"{p50:,.0f} / {p99:,.0f} ms",
            f"PUT latency {put:,.1f} ms: +{p50 - put:,.0f} / +{p99 - put:,.0f} ms",
        )
    ]


async def _listing(args: argparse.Namespace, w: S3World) -> list[Row]:
    reader = _world(args, w.namespace)
    if not isinstance(reader, SessionLister):  # an S3World from before list_sessions
        return [("list_sessions, one page", "-", "not available")]
    before = reader.store.requests
    listed = await reader.list_sessions(limit=1000)
    cost = reader.store.requests - before
    await reader.close()
    return [("list_sessions, one page", f"{len(listed)} sessions", f"{cost} request(s)")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", help="an S3 endpoint URL (default: a throwaway weed mini)")
    parser.add_argument("--bucket", default="fxworld-bench")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument(
        "--follows", type=int, default=100, help="appends timed for the follow row (p99 of these)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="paired rounds per row (median)")
    parser.add_argument(
        "--only",
        type=lambda v: set(v.split(",")),
        default={"appends", "reads", "wakes", "follow", "listing"},
        help="a comma-separated subset of: appends, reads, wakes, follow, listing",
    )
    args = parser.parse_args()
    rows = run_on_s3(args, bench)
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>16}  {note}")


if __name__ == "__main__":
    main()
