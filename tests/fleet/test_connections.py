"""Connection budgets (#28 item 2): 50 processes, each pressing its world harder than
its pool (tests/fleet/fleet_proc.py), against one PostgreSQL and one Redis server;
the server's own list of clients (``pg_stat_activity``, ``CLIENT LIST``), sampled
throughout, never shows a process above its world's stated budget."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio

from fxworld_postgres import PostgresWorld
from fxworld_redis import _world as redis_world
from tests.support.postgres_server import PostgresServer
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.timeout(240)

PROCESSES = 50
HERE = Path(__file__).parent
REPO = HERE.parent.parent

Count = Callable[[], Awaitable[dict[str, int]]]


async def _fleet_peak(urls: list[str], count: Count) -> dict[str, int]:
    """Start the fleet on ``urls``; the most connections each process held at once."""
    procs = _start(urls)
    peak: dict[str, int] = {}
    try:
        ready = asyncio.gather(*(asyncio.to_thread(_ready, p) for p in procs))
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            finished = ready.done()
            for name, n in (await count()).items():
                peak[name] = max(peak.get(name, 0), n)
            if finished:  # a last count with every process ready (and connected)
                break
            await asyncio.sleep(0.05)
        await asyncio.wait_for(ready, 1)
    finally:
        for p in procs:
            p.stdin.close() if p.stdin else None
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    return peak


def _start(urls: list[str]) -> list[subprocess.Popen[bytes]]:
    """The fleet: ``PROCESSES`` of tests/fleet/fleet_proc.py on ``urls``."""
    return [
        subprocess.Popen(
            [sys.executable, str(HERE / "fleet_proc.py"), *urls],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        )
        for _ in range(PROCESSES)
    ]


def _ready(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    assert line.strip() == "ready", line + proc.stdout.read().decode()


def _by_process(names: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in names:
        if re.fullmatch(r"fxworld-\d+", name or ""):
            out[name] = out.get(name, 0) + 1
    return out


async def test_fifty_processes_stay_within_their_budgets(
    pg_url: str, postgres_server: PostgresServer, redis_url: str, redis_server: RedisServer
) -> None:
    """Each process opens both worlds (one fleet, half the start-up CPU). PostgreSQL
    runs them with ``pool_size=2`` (a budget of 5: 250 for the fleet, within the test
    server's 300; the default's 8 would need 400)."""
    pg_fleet_url = pg_url + "&pool_size=2"
    budget = PostgresWorld(pg_fleet_url).connection_budget
    s = postgres_server
    admin = await asyncpg.connect(
        host=s.host, port=s.port, user=s.user, password=s.password, database=s.database
    )
    redis_admin = redis.asyncio.Redis.from_url(redis_server.url)
    peaks: dict[str, dict[str, int]] = {"pg": {}, "redis": {}}

    async def count() -> dict[str, int]:
        rows = await admin.fetch("SELECT application_name FROM pg_stat_activity")
        clients = await redis_admin.client_list()
        return {
            **{f"pg {k}": n for k, n in _by_process([r[0] for r in rows]).items()},
            **{f"redis {k}": n for k, n in _by_process([c["name"] for c in clients]).items()},
        }

    try:
        peak = await _fleet_peak([pg_fleet_url, redis_url], count)
    finally:
        await admin.close()
        await redis_admin.aclose()
    for key, n in peak.items():
        server, name = key.split()
        peaks[server][name] = n
    # every process seen on both servers, each named by its pid, none over budget
    assert len(peaks["pg"]) == len(peaks["redis"]) == PROCESSES, peak
    assert max(peaks["pg"].values()) <= budget, peaks["pg"]
    assert max(peaks["redis"].values()) <= redis_world.POOL_SIZE, peaks["redis"]
    for server, by_process in peaks.items():
        print(f"{server}: {sum(by_process.values())} connections at most, {PROCESSES} processes")
