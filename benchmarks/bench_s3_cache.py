"""S3World's memory after reading many session ids that do not exist.

Prints what the world still holds once the reads are done (nothing is asserted):
Python memory retained (tracemalloc, after a GC), session states cached, and the
requests made. Each read of a missing id costs a GET of its generation pointer
and a LIST or two; before the caches were bounded, each also left a state behind.

    python benchmarks/bench_s3_cache.py                   # a throwaway SeaweedFS weed mini
    python benchmarks/bench_s3_cache.py --reads 100000 --endpoint http://127.0.0.1:9000
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import sys
import time
import tracemalloc
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _measure import run_on_s3  # (this script's folder is on the path)

from fxworld_s3 import S3World


async def bench(args: argparse.Namespace) -> list[tuple[str, str]]:
    options: dict[str, object] = {}
    if "cache_size" in inspect.signature(S3World).parameters and args.cache_size:
        options["cache_size"] = args.cache_size
    world = S3World(
        args.bucket,
        endpoint_url=args.endpoint,
        namespace="cache_" + uuid.uuid4().hex[:8],
        **options,  # type: ignore[arg-type]
    )
    await world.setup()
    await world.read("warm-up")  # the client and its connection pool exist
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    started, requests = time.monotonic(), world.store.requests
    ids = iter(range(args.reads))

    async def reader() -> None:  # a few readers, not one task per read
        for i in ids:
            assert await world.read(f"missing-{i}") == []

    await asyncio.gather(*(reader() for _ in range(args.concurrency)))
    elapsed = time.monotonic() - started
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    made = world.store.requests - requests
    states = len(world.logs.states)
    await world.close()
    return [
        ("reads of missing ids", f"{args.reads:,}"),
        ("cache_size", str(getattr(world, "cache_size", "none (unbounded)"))),
        ("session states kept", f"{states:,}"),
        ("memory retained", f"{retained / 2**20:.1f} MiB"),
        ("requests", f"{made:,} ({made / args.reads:.1f} per read)"),
        ("time", f"{elapsed:.1f} s, concurrency {args.concurrency}"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", help="an S3 endpoint URL (default: a throwaway weed mini)")
    parser.add_argument("--bucket", default="fxworld-bench")
    parser.add_argument("--reads", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--cache-size", type=int, default=0, help="default: the world's")
    args = parser.parse_args()
    rows = run_on_s3(args, bench)
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
