"""The store's ceiling K for benchmarks/bench_fleet.py: single-entry appends/s with
as many calls in flight as the fleet's largest run has sessions in flight.

One append at a time per process (``fxworld bench``) never fills a store that
commits many clients' writes together (Redis with ``appendfsync always`` fsyncs once
per event-loop turn for all of them), so K here is measured the same way on every
backend: ``in_flight`` writers (each one append at a time on its own session) spread
over P processes of ``in_flight / P`` tasks each, for each P of a sweep; the best.

    python benchmarks/_fleet_ceiling.py URL TASKS SECONDS   (one child process)
"""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

from fxworld import NewEntry, open_world  # noqa: E402
from fxworld_conformance.target import with_namespace  # noqa: E402

__all__ = ["store_ceiling"]


async def store_ceiling(base: str, in_flight: int, sweep: list[int], seconds: float = 1.0) -> float:
    """The most single-entry appends/s of ``in_flight`` writers over P processes, for
    each P in ``sweep`` (capped at ``in_flight``), each in a fresh namespace; prints each."""
    best = 0.0
    for processes in sorted({min(p, in_flight) for p in sweep}):
        rate = await appends_per_second(base, processes, math.ceil(in_flight / processes), seconds)
        print(f"  K from {processes} x {math.ceil(in_flight / processes)} writers: {rate:,.0f}/s")
        best = max(best, rate)
    return best


async def appends_per_second(base: str, processes: int, tasks: int, seconds: float) -> float:
    """``processes`` children of ``tasks`` writers each on a fresh namespace."""
    url = with_namespace(base, f"ceiling_{uuid.uuid4().hex[:10]}")
    await setup(url)
    return await asyncio.to_thread(run_children, url, processes, tasks, seconds)


def run_children(url: str, processes: int, tasks: int, seconds: float) -> float:
    """Start the children, start their writers together once all are ready; appends/s
    from that start to the last writer's end."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])
    )
    command = [sys.executable, str(Path(__file__)), url, str(tasks), str(seconds)]
    children = [
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(processes)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a ceiling writer exited: {child.wait()}")
        start = time.time() + 0.1
        for child in children:
            assert child.stdin is not None
            child.stdin.write(f"{start}\n")
            child.stdin.flush()
        answers = [child.communicate()[0].split() for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    ops = sum(int(a[0]) for a in answers)
    return ops / (max(float(a[1]) for a in answers) - start)


async def setup(url: str) -> None:
    world = open_world(url)
    try:
        await world.setup()
    finally:
        await world.close()


async def child(url: str, tasks: int, seconds: float) -> tuple[int, float]:
    """Say ready, read the start time, run ``tasks`` writers until ``seconds`` after
    it: (appends, when the last one ended)."""
    world = open_world(url)
    entry = [NewEntry("bench", {"text": "x" * 64})]
    done = 0

    async def writer(sid: str, until: float) -> None:
        nonlocal done
        while time.time() < until:
            await world.append(sid, entry)
            done += 1

    try:
        await world.append(f"warm-{os.getpid()}", entry)  # connect before the start
        print("ready", flush=True)
        start = float(await asyncio.to_thread(sys.stdin.readline))
        await asyncio.sleep(max(0.0, start - time.time()))
        sids = [f"w{os.getpid()}-{k}" for k in range(tasks)]
        await asyncio.gather(*(writer(sid, start + seconds) for sid in sids))
        return done, time.time()
    finally:
        await world.close()


if __name__ == "__main__":
    ops, ended = asyncio.run(child(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
    print(ops, ended)
