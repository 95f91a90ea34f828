"""WorldSaver with real OS processes on every shared world: one writer per thread
(a second run takes the thread over, the first is refused, the chain never forks),
crash and resume (a SIGKILL inside a superstep; the finished task is not run
again), and an interrupt answered from another process."""

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

from fxworld.integrations.langgraph import WorldSaver
from tests.integrations.conftest import open_test_world
from tests.integrations.lg_procs import LOOP_STEPS, TAKEN_OVER

ROOT = Path(__file__).resolve().parents[2]


def spawn(role: str, url: str, thread: str, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integrations.lg_procs", role, url, thread, str(out)],
        cwd=ROOT,
        env=os.environ.copy(),
    )


def wait_for(path: Path, proc: subprocess.Popen[bytes], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, f"the child exited with {proc.returncode} first"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


async def history(url: str, thread: str) -> list[Any]:
    world = open_test_world(url)
    try:
        saver = WorldSaver(world)
        return [t async for t in saver.alist({"configurable": {"thread_id": thread}})]
    finally:
        await world.close()


async def pending(saver: WorldSaver, thread: str) -> list[tuple[str, Any]]:
    """The latest checkpoint's pending writes, as (channel, value)."""
    latest = await saver.aget_tuple({"configurable": {"thread_id": thread}})
    return [(w[1], w[2]) for w in (latest.pending_writes or [])] if latest else []


def unreachable(tuples: list[Any]) -> set[str]:
    """The checkpoints not on the parent chain of the latest one (a fork)."""
    parent = {
        t.config["configurable"]["checkpoint_id"]: (t.parent_config or {})
        .get("configurable", {})
        .get("checkpoint_id")
        for t in tuples
    }
    on_chain, cid = set(), tuples[0].config["configurable"]["checkpoint_id"]
    while cid is not None:
        on_chain.add(cid)
        cid = parent.get(cid)
    return set(parent) - on_chain


async def test_a_second_process_takes_the_thread_over_and_the_chain_never_forks(
    shared_world_url: str, tmp_path: Path
) -> None:
    first = spawn("loop", shared_world_url, "t", tmp_path)
    wait_for(tmp_path / "inside", first)  # the first run is inside a node
    second = spawn("takeover", shared_world_url, "t", tmp_path)
    assert second.wait(120) == 0
    (tmp_path / "go").write_text("")
    assert first.wait(120) == TAKEN_OVER  # its next write was refused
    assert "taken over" in (tmp_path / "loop-refused").read_text()
    tuples = await history(shared_world_url, "t")
    assert tuples[0].checkpoint["channel_values"]["n"] == LOOP_STEPS
    assert unreachable(tuples) == set()


async def test_a_sigkilled_superstep_resumes_without_rerunning_finished_tasks(
    shared_world_url: str, tmp_path: Path
) -> None:
    crashed = spawn("parallel", shared_world_url, "t", tmp_path)
    wait_for(tmp_path / "slow-inside", crashed)
    world = open_test_world(shared_world_url)
    try:  # kill it mid-superstep once the finished task's writes are saved
        saver, deadline = WorldSaver(world), time.monotonic() + 60
        while ("done", ["fast"]) not in await pending(saver, "t"):  # not the input's
            assert time.monotonic() < deadline, "the fast task's writes were never saved"
            await asyncio.sleep(0.02)
    finally:
        await world.close()
    crashed.send_signal(signal.SIGKILL)
    crashed.wait()
    (tmp_path / "go").write_text("")
    resumed = spawn("resume", shared_world_url, "t", tmp_path)
    assert resumed.wait(120) == 0
    assert sorted(json.loads((tmp_path / "result").read_text())["done"]) == ["fast", "slow"]
    runs = (tmp_path / "runs").read_text().split()
    assert runs.count("fast") == 1  # its saved writes were used, not run again
    assert runs.count("slow") == 2  # killed inside, run again


async def test_an_interrupt_is_answered_from_another_process(
    shared_world_url: str, tmp_path: Path
) -> None:
    asker = spawn("ask", shared_world_url, "t", tmp_path)
    assert asker.wait(120) == 0
    answerer = spawn("answer", shared_world_url, "t", tmp_path)
    assert answerer.wait(120) == 0
    assert json.loads((tmp_path / "result").read_text()) == {"answer": "yes"}
