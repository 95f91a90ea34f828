"""Rolling deploys (#28 item 5): half of a fleet of real ``fxworld worker`` processes
gets SIGTERM while every session's turn runs, new workers start, and every turn
still ends once: no prompt lost, no tool call run twice, and each session handed
over reaches another worker within 1 s (by the store's stamps), on PostgreSQL and
Redis."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fxworld import Agent, open_world
from fxworld.testing import ScriptedModel

pytestmark = pytest.mark.timeout(180)

HERE = Path(__file__).parent
REPO = HERE.parent.parent
SESSIONS = 16
STEPS = 8  # fleet_agent.STEPS
LEASE = 10.0  # a worker lost without a handover would keep its sessions this long
HANDOVER = 1.0


def _worker(url: str, tmp: Path, name: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, FLEET_RUNS=str(tmp / "runs.jsonl"))
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(REPO), env.get("PYTHONPATH", "")])
    with open(tmp / f"{name}.log", "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "fxworld.cli", "worker", "fleet_agent:agent", *_args(url)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp,
        )


def _args(url: str) -> list[str]:
    return ["--world", url, "--lease", str(LEASE), "-v"]


async def _ready(tmp: Path, name: str, proc: subprocess.Popen[bytes]) -> None:
    end = time.monotonic() + 60
    while b"worker ready" not in (tmp / f"{name}.log").read_bytes():
        assert proc.poll() is None and time.monotonic() < end, (tmp / f"{name}.log").read_text()
        await asyncio.sleep(0.05)


def _runs_by_pid(runs: Path) -> dict[int, int]:
    by_pid: dict[int, int] = {}
    for line in runs.read_text().splitlines() if runs.exists() else []:
        pid = json.loads(line)["pid"]
        by_pid[pid] = by_pid.get(pid, 0) + 1
    return by_pid


async def _busiest(runs: Path, n: int) -> list[int]:
    """The pids of the ``n`` workers running the most tools, once ``n`` run some
    (a worker takes as many wakes as it has room for: the first may take them all)."""
    end = time.monotonic() + 60
    while True:
        by_pid = await asyncio.to_thread(_runs_by_pid, runs)
        if len(by_pid) >= n or sum(by_pid.values()) >= SESSIONS:
            return sorted(by_pid, key=by_pid.__getitem__)[-n:]
        assert time.monotonic() < end, "the workers never ran a tool"
        await asyncio.sleep(0.02)


async def _logs_when_done(world: Any, sids: list[str]) -> dict[str, list[Any]]:
    end = time.monotonic() + 90
    while True:
        logs = {sid: await world.read(sid, 0, limit=10_000) for sid in sids}
        if all(log and log[-1].kind == "turn.finished" for log in logs.values()):
            return logs
        assert time.monotonic() < end, {s: [e.kind for e in log][-3:] for s, log in logs.items()}
        await asyncio.sleep(0.2)


@pytest.mark.parametrize("backend", ["postgres", "redis"])
async def test_half_the_fleet_redeployed_under_load_loses_and_doubles_nothing(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = request.getfixturevalue("pg_url" if backend == "postgres" else "redis_url")
    procs = {f"old{i}": _worker(url, tmp_path, f"old{i}") for i in range(4)}
    world = open_world(url)
    try:
        for name, proc in procs.items():
            await _ready(tmp_path, name, proc)
        client = Agent(ScriptedModel(["-"]), world=world)
        sids = [f"s{i}" for i in range(SESSIONS)]
        await asyncio.gather(*(client.session(sid).prompt("go").accepted for sid in sids))
        victims = [p for p in procs.values() if p.pid in await _busiest(tmp_path / "runs.jsonl", 2)]
        for proc in victims:  # half the fleet, mid-turn: they hand their sessions back
            proc.send_signal(signal.SIGTERM)
        procs.update({f"new{i}": _worker(url, tmp_path, f"new{i}") for i in range(2)})
        logs = await _logs_when_done(world, sids)
        for proc in victims:
            assert await asyncio.to_thread(proc.wait, 30) == 0
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            await asyncio.to_thread(proc.wait, 30)
        await world.close()
    _assert_once_and_handed_over(logs, tmp_path / "runs.jsonl")


def _assert_once_and_handed_over(logs: dict[str, list[Any]], runs: Path) -> None:
    ran = [json.loads(line)["execution_id"] for line in runs.read_text().splitlines()]
    assert len(ran) == len(set(ran)), "a tool call ran twice"
    handovers = []
    for sid, log in logs.items():
        kinds = [e.kind for e in log]
        assert kinds.count("prompt") == kinds.count("turn.finished") == 1, (sid, kinds)
        finished = [e.data["execution_id"] for e in log if e.kind == "tool.finished"]
        assert len(finished) == len(set(finished)) == STEPS, (sid, kinds)
        for i, e in enumerate(log):
            if e.kind == "turn.yielded" and e.data.get("reason") == "handover":
                taken = next(x for x in log[i:] if x.kind == "fence")
                handovers.append((taken.at - e.at).total_seconds())
    assert handovers, "no session was handed over: the SIGTERM came too late"
    assert max(handovers) < HANDOVER, sorted(handovers)
    print(f"{len(handovers)} handovers, the slowest {max(handovers) * 1000:.0f} ms")
