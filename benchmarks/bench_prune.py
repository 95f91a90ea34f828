"""What ``fxworld.prune`` costs per session, beside a plain ``delete`` in the same run.

Prints a table (nothing is asserted). For each world: N idle sessions, each with
one finished turn (prompt, fence, turn.started, message, turn.finished, as the
engine writes them), are pruned; the baseline is ``world.delete`` of N such
sessions, one after the other, in the same run on the same server. The ratio says
what the checks cost (``last_entry``, the reads of the latest turn,
``wake_state`` where the world has it, ``delete_if_idle``). Also: prune of N
sessions that are all active (only ``last_entry`` each).

    python benchmarks/bench_prune.py                   # SQLite, and a throwaway PostgreSQL
    python benchmarks/bench_prune.py --sessions 500 --url postgresql://user@host/db
    python benchmarks/bench_prune.py --s3 --sessions 100  # also a throwaway S3 server
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import fxworld
from fxworld import NewEntry
from fxworld.protocol import World


async def _seed(world: World, ids: list[str]) -> None:
    for sid in ids:
        await world.append(sid, [NewEntry("prompt", {"v": 1, "text": "hi", "key": sid})])
        fence = await world.acquire(sid)
        turn = {"v": 1, "prompt": 1, "turn": "t"}
        await world.append(sid, [NewEntry("turn.started", turn)], fence=fence)
        message = {"v": 1, "call": "c", "model": "m", "text": "hello " * 20, "tool_calls": []}
        await world.append(
            sid,
            [NewEntry("message", message), NewEntry("turn.finished", {**turn, "text": "hello"})],
            fence=fence,
        )


async def _per_session(world: World, n: int) -> tuple[float, float, float]:
    """ms per session: delete (baseline), prune of idle ones, prune of active ones."""
    base = [f"d-{uuid.uuid4().hex[:8]}-{i}" for i in range(n)]
    await _seed(world, base)
    start = time.perf_counter()
    for sid in base:
        await world.delete(sid)
    delete_ms = (time.perf_counter() - start) * 1000 / n
    idle = [f"p-{uuid.uuid4().hex[:8]}-{i}" for i in range(n)]
    await _seed(world, idle)
    await asyncio.sleep(0.2)
    start = time.perf_counter()
    active = await fxworld.prune(world, idle_for=3600)
    active_ms = (time.perf_counter() - start) * 1000 / n
    start = time.perf_counter()
    report = await fxworld.prune(world, idle_for=0.1)
    prune_ms = (time.perf_counter() - start) * 1000 / n
    assert len(report.deleted) == n and not active.deleted, (report, active)
    return delete_ms, prune_ms, active_ms


async def main(urls: dict[str, str], n: int) -> None:
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {n} sessions")
    print(f"{'world':<10} {'delete ms':>10} {'prune ms':>10} {'ratio':>6} {'active ms':>10}")
    for name, url in urls.items():
        world = fxworld.open_world(url)
        await world.setup()
        try:
            d, p, a = await _per_session(world, n)
        finally:
            await world.close()
        print(f"{name:<10} {d:>10.3f} {p:>10.3f} {p / d:>6.1f} {a:>10.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a PostgreSQL server (default: a throwaway local one)")
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--s3", action="store_true", help="also S3World on a throwaway server")
    args = parser.parse_args()
    server = None
    s3 = None
    url = args.url
    if url is None:
        from tests.support.postgres_server import start_postgres

        server = start_postgres(fsync=True)
        url = server.url
    try:
        with tempfile.TemporaryDirectory() as tmp:
            worlds = {"sqlite": f"sqlite:///{tmp}/w.db", "postgres": url}
            if args.s3:
                from tests.support.s3_server import start_s3

                s3 = start_s3()
                worlds["s3"] = s3.url(prefix=f"bench-{uuid.uuid4().hex[:8]}")
            asyncio.run(main(worlds, args.sessions))
    finally:
        if server is not None:
            server.stop()
        if s3 is not None:
            s3.stop()
