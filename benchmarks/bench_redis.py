"""RedisWorld throughput and latency beside the same server's raw XADD rate.

Prints a table per target (nothing is asserted): a throwaway local redis-server
(AOF, appendfsync always) and a local three-master Redis Cluster, or the URL given.
Every figure is measured in the same run on the same server as its baseline: a
redis-py loop of plain ``XADD`` of the same 200-byte payload with the same
concurrency, on a client made as the world makes its own, so the ratio says what
fxworld's fenced script costs over the cheapest durable append the server can do.
Each figure is the median of ``--rounds`` rounds, each round measuring the
baseline just before the figure (the disk's fsync rate drifts; see
``_measure.py``).

    python benchmarks/bench_redis.py                    # one server and a Cluster
    python benchmarks/bench_redis.py --url redis://host:6379/0 [--seconds 3]

Rows: fenced single-entry appends/s with 1 and 8 sessions; batches of 10 entries;
wakes taken and finished per second with 8 workers (one at a time, and
``take_wakes(limit=10)``, the batch's leases finished side by side); engine tool steps/s (a turn
of no-op tool calls, scripted model); follow latency p50/p99 (append call to
follower yield, another world) beside one plain ``XADD``'s; server memory per stored 200-byte entry.
Targets (issue 12): >= 70 % of raw XADD at 8 sessions, follow p99 <= 5 ms,
>= 3,000 wakes/s.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import Rows, follow_latency, pct, timed

from fxworld import Agent, NewEntry, take_wakes, tool
from fxworld.testing import ScriptedModel
from fxworld_redis import RedisWorld

PAYLOAD = {"role": "assistant", "text": "x" * 200, "n": 1}


def _world(url: str, ns: str) -> RedisWorld:
    return RedisWorld(url, namespace=ns)


async def raw_xadd_rate(url: str, workers: int, seconds: float) -> float:
    world = _world(url, "bench_raw")  # its client: the world's settings, no script
    await world.setup()
    client: Any = world.client
    prefix = f"bench_raw_{uuid.uuid4().hex[:8]}"
    data = json.dumps(PAYLOAD)

    async def step(k: int) -> int:
        await client.xadd(f"{prefix}:{k}", {"k": "message", "d": data})
        return 1

    try:
        await timed(workers, 0.3, step)  # warm up
        return await timed(workers, seconds, step)
    finally:
        for k in range(workers):
            await client.delete(f"{prefix}:{k}")
        await world.close()


async def raw_xadd_latency(url: str, n: int) -> list[float]:
    """Seconds per plain ``XADD`` (with appendfsync always: the fsync), one client,
    paced as ``follow_latency``: what any durable push waits for at least."""
    world = _world(url, "bench_raw")  # its client: the world's settings, no script
    await world.setup()
    client: Any = world.client
    key = f"bench_lat_{uuid.uuid4().hex[:8]}"
    data = json.dumps(PAYLOAD)
    out = []
    try:
        for _ in range(n):
            t = time.perf_counter()
            await client.xadd(key, {"k": "message", "d": data})
            out.append(time.perf_counter() - t)
            await asyncio.sleep(0.002)
    finally:
        await client.delete(key)
        await world.close()
    return out


async def world_append_rate(url: str, workers: int, seconds: float, *, batch: int = 1) -> float:
    world = _world(url, "bench_" + uuid.uuid4().hex[:8])
    await world.setup()
    entries = [NewEntry("message", PAYLOAD)] * batch
    fences = [await world.acquire(f"s{k}") for k in range(workers)]

    async def step(k: int) -> int:
        await world.append(f"s{k}", entries, fence=fences[k])
        return batch

    try:
        await timed(workers, 0.3, step)
        return await timed(workers, seconds, step)
    finally:
        await world.close()


async def wake_rate(url: str, workers: int, count: int, *, batch: int = 1) -> float:
    world = _world(url, "bench_" + uuid.uuid4().hex[:8])
    await world.setup()
    for i in range(0, count, 100):
        await asyncio.gather(*(world.wake(f"s{j}") for j in range(i, min(count, i + 100))))
    handled = 0

    async def worker() -> None:
        nonlocal handled
        while leases := await take_wakes(world, lease=30, limit=batch):
            # the sessions of a batch run side by side, so they finish side by side
            await asyncio.gather(*(world.finish_wake(lease) for lease in leases))
            handled += len(leases)

    try:
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(workers)))
        elapsed = time.perf_counter() - start
        assert handled == count, (handled, count)
        return handled / elapsed
    finally:
        await world.close()


async def engine_steps(url: str, steps: int) -> float:
    """Engine steps/s of one turn of ``steps`` no-op tool calls (as bench_engine.py)."""

    @tool(idempotent=True)
    def noop() -> str:
        return "ok"

    world = _world(url, "bench_" + uuid.uuid4().hex[:8])
    await world.setup()
    replies: list[object] = [{"tool": "noop"} for _ in range(steps)] + ["done"]
    agent = Agent(ScriptedModel(replies), tools=[noop], world=world)  # type: ignore[arg-type]
    turn = agent.session("bench").prompt("go")
    await turn.accepted
    t0 = time.perf_counter()
    await agent.work(until_idle=True, concurrency=1)
    elapsed = time.perf_counter() - t0
    assert await turn == "done"
    await world.close()
    return (1 + 2 * steps + 1 + 1) / elapsed  # start, (model, tool) x steps, model, finish


async def memory_per_entry(url: str, n: int = 2000) -> float:
    """Server bytes per stored 200-byte entry: MEMORY USAGE of the log and the
    session's hash, over ``n`` entries."""
    world = _world(url, "bench_" + uuid.uuid4().hex[:8])
    await world.setup()
    try:
        for _ in range(0, n, 100):
            await world.append("mem", [NewEntry("message", PAYLOAD)] * 100)
        keys = await world._keys("mem")
        client: Any = world.client
        used = 0
        for key in (keys.log("mem"), keys.meta("mem")):
            used += int(await client.memory_usage(key, samples=0) or 0)
        return used / n
    finally:
        await world.close()


async def measure(label: str, url: str, seconds: float, rounds: int) -> None:
    table = Rows(rounds, lambda workers: raw_xadd_rate(url, workers, seconds))
    row = table.add

    print(f"measuring {label}, {rounds} rounds of {seconds:g} s each ...", flush=True)
    await row("fenced append, 1 session", "/s", lambda: world_append_rate(url, 1, seconds), 1)
    await row("fenced append, 8 sessions", "/s", lambda: world_append_rate(url, 8, seconds), 8)
    await row(
        "fenced append, 8 sessions, batches of 10",
        "entries/s",
        lambda: world_append_rate(url, 8, seconds, batch=10),
        8,
    )
    await row("wakes taken + finished, 8 workers", "/s", lambda: wake_rate(url, 8, 6000))
    await row(
        "wakes, 8 workers taking 10 at a time", "/s", lambda: wake_rate(url, 8, 6000, batch=10)
    )
    await row("engine tool steps (1 turn, no-op tools)", "steps/s", lambda: engine_steps(url, 200))
    ns = "bench_" + uuid.uuid4().hex[:8]
    lat = await follow_latency(_world(url, ns), _world(url, ns), 400)
    raw_lat = await raw_xadd_latency(url, 400)
    memory = await memory_per_entry(url)
    print()
    print(f"{label}")
    print(f"{'measure':44} {'RedisWorld':>20} {'raw XADD':>12} {'ratio':>6}")
    print("-" * 86)
    for name, value, raw, ratio in table.rows:
        print(f"{name:44} {value:>20} {raw:>12} {ratio:>6}")
    print(
        f"{'follow latency p50 / p99 (append -> yield)':44} "
        f"{pct(lat, 50):>8.2f} / {pct(lat, 99):.2f} ms "
        f"{pct(raw_lat, 50):>5.2f} / {pct(raw_lat, 99):.2f} ms (one XADD)"
    )
    print(f"{'server memory per stored 200-byte entry':44} {memory:>17,.0f} B")
    print()


async def main(urls: list[tuple[str, str]], seconds: float, rounds: int) -> None:
    for label, url in urls:
        await measure(label, url, seconds, rounds)
    print(
        "ratio = RedisWorld / raw XADD on the same server, same concurrency: the median "
        f"over {rounds} rounds of the baseline measured just before the figure; "
        f"{seconds:g} s each"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="an existing server (default: a local server and Cluster)")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure (median)")
    parser.add_argument("--no-cluster", action="store_true", help="skip the local Cluster")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop our servers when killed
    servers: list[Any] = []
    try:
        if args.url:
            targets = [(args.url, args.url)]
        else:
            from tests.support.redis_server import LocalRedis, start_cluster

            single = LocalRedis(password="")
            servers.append(single)
            targets = [("one redis-server, appendfsync always", single.url)]
            if not args.no_cluster:
                cluster = start_cluster()
                servers.append(cluster)
                targets.append(("Redis Cluster, 3 masters, appendfsync always", cluster.url))
        asyncio.run(main(targets, args.seconds, args.rounds))
    finally:
        for s in servers:
            s.stop()
