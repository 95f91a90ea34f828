"""Connection budgets (#28 item 2): 50 processes (forked from one that imported the
worlds' code once), each pressing its world harder than
its pool (tests/fleet/fleet_proc.py), against one PostgreSQL, one Redis server and a 3-master Redis
Cluster; the servers' own lists of clients (``pg_stat_activity``, ``CLIENT LIST`` on
each node), sampled throughout, never show a process above its world's stated
budget (on the Cluster, per node)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio

from fxworld_postgres import PostgresWorld
from fxworld_redis import RedisWorld
from tests.support.namespaces import fresh_namespace
from tests.support.postgres_server import PostgresServer
from tests.support.redis_server import RedisCluster, RedisServer

pytestmark = pytest.mark.timeout(240)

PROCESSES = 50
HERE = Path(__file__).parent
REPO = HERE.parent.parent

Count = Callable[[], Awaitable[dict[str, int]]]


async def _fleet_peak(urls: list[str], count: Count) -> dict[str, int]:
    """Start the fleet on ``urls``; the most connections each of its processes held
    at once. Only the fleet's own processes count (the servers are the suite's, and
    this process's own worlds, earlier tests', may still hold connections there):
    each names its pid when it is ready."""
    fleet = _start(urls)
    peak: dict[str, int] = {}
    try:
        ready = asyncio.ensure_future(asyncio.to_thread(_ready, fleet))
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            finished = ready.done()
            for name, n in (await count()).items():
                peak[name] = max(peak.get(name, 0), n)
            if finished:  # a last count with every process ready (and connected)
                break
            await asyncio.sleep(0.05)
        ours = {f"fxworld-{pid}" for pid in await asyncio.wait_for(ready, 1)}
    finally:
        if fleet.stdin:
            fleet.stdin.close()
        try:
            fleet.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(fleet.pid, signal.SIGKILL)  # the fleet's own session: it and its children
            fleet.wait()
    return {name: n for name, n in peak.items() if name.split()[-1] in ours}


def _start(urls: list[str]) -> subprocess.Popen[bytes]:
    """The fleet: tests/fleet/fleet_proc.py forking ``PROCESSES`` processes on ``urls``."""
    return subprocess.Popen(
        [sys.executable, str(HERE / "fleet_proc.py"), str(PROCESSES), *urls],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        start_new_session=True,
    )


def _ready(fleet: subprocess.Popen[bytes]) -> set[int]:
    """The pids of the fleet's processes, once each has said it is ready."""
    assert fleet.stdout is not None
    pids: set[int] = set()
    while len(pids) < PROCESSES:
        line = fleet.stdout.readline().decode()
        assert line.startswith("ready "), line + fleet.stdout.read().decode()
        pids.add(int(line.split()[1]))
    return pids


def _by_process(names: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in names:
        if re.fullmatch(r"fxworld-\d+", name or ""):
            out[name] = out.get(name, 0) + 1
    return out


async def test_fifty_processes_stay_within_their_budgets(
    pg_url: str,
    postgres_server: PostgresServer,
    redis_url: str,
    redis_server: RedisServer,
    redis_cluster: RedisCluster,
) -> None:
    """Each process opens all three worlds (one fleet, one start-up each).
    PostgreSQL runs them with ``pool_size=2`` (a budget of 5: 250 for the fleet,
    within the test server's 300; the default's 8 would need 400)."""
    pg_fleet_url = pg_url + "&pool_size=2"
    cluster_url = f"{redis_cluster.url}&namespace={fresh_namespace()}"
    budget = {
        "pg": PostgresWorld(pg_fleet_url).connection_budget,
        "redis": RedisWorld(redis_url).connection_budget,
        "node": RedisWorld(cluster_url).connection_budget,
    }
    s = postgres_server
    admin = await asyncpg.connect(
        host=s.host, port=s.port, user=s.user, password=s.password, database=s.database
    )
    redis_admins = {"redis": redis.asyncio.Redis.from_url(redis_server.url)} | {
        f"node{i}": redis.asyncio.Redis(host=n.host, port=n.port)
        for i, n in enumerate(redis_cluster.nodes)
    }

    async def count() -> dict[str, int]:
        rows = await admin.fetch("SELECT application_name FROM pg_stat_activity")
        out = {f"pg {k}": n for k, n in _by_process([r[0] for r in rows]).items()}
        for server, client in redis_admins.items():
            names = [c["name"] for c in await client.client_list()]
            out |= {f"{server} {k}": n for k, n in _by_process(names).items()}
        return out

    try:
        peak = await _fleet_peak([pg_fleet_url, redis_url, cluster_url], count)
    finally:
        await admin.close()
        for client in redis_admins.values():
            await client.aclose()
    peaks: dict[str, dict[str, int]] = {}
    for key, n in peak.items():
        server, name = key.split()
        peaks.setdefault(server, {})[name] = n
    # every process seen on each server, named by its pid, none over budget
    assert {len(by_process) for by_process in peaks.values()} == {PROCESSES}, peak
    assert len(peaks) == 2 + len(redis_cluster.nodes), peaks.keys()
    for server, by_process in peaks.items():
        # on the Cluster, redis-py keeps one more on the node of the URL (node0), the
        # connection it discovers the Cluster's slots through
        stated = budget["node" if server.startswith("node") else server] + (server == "node0")
        assert max(by_process.values()) <= stated, (server, by_process)
        print(f"{server}: {sum(by_process.values())} connections at most, {PROCESSES} processes")
