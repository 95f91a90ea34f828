"""Two agents on one shared world, one ``fxworld worker`` process per agent (W19):
every session is answered by its own agent, none by the other, none is left
waiting; on Redis, Redis Cluster and S3. Each worker's ready line names its agent
and how many of its sessions wait. The drain time (both workers started to both
idle) is printed for the record (``-s``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fxworld import Agent, open_world
from fxworld.protocol import WakeLister
from fxworld.testing import ScriptedModel
from tests.fleet.two_agents_app import NAMES, answer
from tests.support.namespaces import fresh_namespace, set_up
from tests.support.redis_server import RedisCluster, RedisServer
from tests.support.s3_server import S3Server

SESSIONS = 50  # per agent
REPO = Path(__file__).resolve().parents[2]


def _with_namespace(url: str) -> str:
    return set_up(f"{url}{'&' if '?' in url else '?'}namespace={fresh_namespace('ag')}")


async def _prompt_all(url: str) -> dict[str, list[str]]:
    """``SESSIONS`` new sessions through each agent (the first prompt records the owner)."""
    made: dict[str, list[str]] = {}
    for name in NAMES:
        client = Agent(ScriptedModel([]), name=name, world=url)
        made[name] = []
        for _ in range(0, SESSIONS, 10):
            accepted = await asyncio.gather(*(client.session().create("Hi") for _ in range(10)))
            made[name] += [a.session_id for a in accepted]
        await client.world.close()
    return made


def _workers(url: str, tmp: Path) -> tuple[float, dict[str, str]]:
    """One ``fxworld worker --until-idle`` per agent, at once: the seconds until both
    returned, and what each printed."""
    logs = {name: tmp / f"worker-{name}.log" for name in NAMES}
    started = time.monotonic()
    procs = {}
    for name in NAMES:
        with open(logs[name], "wb") as log:
            procs[name] = subprocess.Popen(
                [sys.executable, "-m", "fxworld", "worker", "tests.fleet.two_agents_app:agent",
                 "--world", url, "--until-idle", "--concurrency", "16"],
                env={**os.environ, "TEST_AGENT": name, "PYTHONPATH": str(REPO)},
                stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
            )  # fmt: skip
    for name, proc in procs.items():
        assert proc.wait(timeout=240) == 0, logs[name].read_text()[-3000:]
    return time.monotonic() - started, {n: p.read_text() for n, p in logs.items()}


async def _answers(url: str, sessions: dict[str, list[str]]) -> None:
    world = open_world(url)
    try:
        for name, sids in sessions.items():
            for sid in sids:
                entries = await world.read(sid)
                texts = [e.data.get("text") for e in entries if e.kind == "turn.finished"]
                assert texts == [answer(name)], (sid, name, texts)  # its own agent, once
        assert isinstance(world, WakeLister)
        assert await world.list_wakes() == []  # none left waiting
    finally:
        await world.close()


async def _two_agents(url: str, tmp: Path, label: str) -> None:
    sessions = await _prompt_all(url)
    drain, printed = await asyncio.to_thread(_workers, url, tmp)
    for name in NAMES:
        assert f"agent {name!r} ({SESSIONS} of its sessions waiting)" in printed[name], printed
    await _answers(url, sessions)
    print(f"\n[two agents] {label}: {2 * SESSIONS} sessions drained in {drain:.1f} s")


async def test_two_agents_two_workers_on_redis(redis_server: RedisServer, tmp_path: Path) -> None:
    await _two_agents(_with_namespace(redis_server.url), tmp_path, "Redis")


async def test_two_agents_two_workers_on_redis_cluster(
    redis_cluster: RedisCluster, tmp_path: Path
) -> None:
    await _two_agents(_with_namespace(redis_cluster.url), tmp_path, "Redis Cluster")


async def test_two_agents_two_workers_on_s3(s3_server: S3Server, tmp_path: Path) -> None:
    await _two_agents(set_up(s3_server.url(namespace=fresh_namespace("ag"))), tmp_path, "S3")


@pytest.fixture(autouse=True)
def _no_push(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FXWORLD_PUSH", raising=False)
