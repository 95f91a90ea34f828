"""The store's ceiling K for benchmarks/bench_fleet.py, in tool steps/s: the fleet's
own calls of the world, replayed without the engine by as many processes with as
many sessions in flight each as the fleet has.

One turn is replayed as the fleet made it (its calls read from a finished session's
log, one append per distinct entry stamp): the prompt (an unfenced append with its
wake), ``take_wake``, ``acquire``, the replay's ``read`` (of the prompt and the fence,
as a session's first turn reads), each fenced append with the entries it carried,
``finish_wake``. For a fleet of W workers of S slots each, W processes of S tasks
replay turn after turn on W x S sessions: each task prompts its own session, runs
a turn on whichever session is due, prompts that one again once its turn is done,
and so on (so no session is prompted while a turn runs on it, as in the fleet's
run). K for W is their tool steps/s: the fleet's shape without the engine's CPU (on
a shared machine a store's ceiling falls as more client processes share its cores,
and a process's calls queue for its pool, so one figure for every W would not do;
the best of a sweep over-stated it for the other counts). It is measured the same
way on every backend, and it holds what binds the store whatever it is: its commit
rate, its write lock (SQLite: one writer at a time, held for every call of a turn,
the larger ones too), its fsyncs per event-loop turn (Redis ``appendfsync always``).

    python benchmarks/_fleet_ceiling.py URL TASKS SECONDS TURN_JSON   (one child)
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

from fxworld import NewEntry, open_world  # noqa: E402
from fxworld_conformance.target import with_namespace  # noqa: E402

__all__ = ["store_ceiling", "turn_calls"]

Turn = list[list[tuple[str, Any]]]  # the appends of one turn: [(kind, data), ...] each


def turn_calls(log: list[Any]) -> Turn:
    """A finished session's appends, one per distinct commit stamp, in order; the
    world's own ``fence`` entries (its acquire) left out."""
    groups: dict[Any, list[tuple[str, Any]]] = {}
    for e in log:
        if not e.kind.startswith("fence"):
            groups.setdefault(e.at, []).append((e.kind, e.data))
    return list(groups.values())


async def store_ceiling(
    base: str, slots: int, sweep: list[int], turn: Turn, seconds: float = 1.0
) -> dict[int, float]:
    """Tool steps/s of P processes of ``slots`` replaying tasks each, for each P in
    ``sweep``, each in a fresh namespace; prints each."""
    found = {}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(turn, f)
        f.flush()
        for processes in sorted(set(sweep)):
            tasks = slots
            url = with_namespace(base, f"ceiling_{uuid.uuid4().hex[:10]}")
            await setup(url)
            args = (url, processes, tasks, seconds, f.name)
            rate = await asyncio.to_thread(run_children, *args)
            print(f"  K from {processes} x {tasks} sessions in flight: {rate:,.0f} steps/s")
            found[processes] = rate
    return found


def run_children(url: str, processes: int, tasks: int, seconds: float, turn: str) -> float:
    """Start the children, start their tasks together once all are ready; tool
    steps/s from that start to the last task's end."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])
    )
    command = [sys.executable, str(Path(__file__)), url, str(tasks), str(seconds), turn]
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
    steps = sum(float(a[0]) for a in answers)
    return steps / (max(float(a[1]) for a in answers) - start)


async def setup(url: str) -> None:
    world = open_world(url)
    try:
        await world.setup()
    finally:
        await world.close()


async def replay_turn(world: Any, turn: list[list[NewEntry]]) -> tuple[int, str | None]:
    """One turn's calls as the fleet makes them, on a due session taken: the tool
    steps it holds and the session (``None`` if no wake was due)."""
    wake = await world.take_wake(lease=30.0)
    if wake is None:
        return 0, None
    fence = await world.acquire(wake.session_id)
    await world.read(wake.session_id, fence.seq - 2, limit=10_000)  # prompt and fence
    for entries in turn[1:]:
        await world.append(wake.session_id, entries, fence=fence)
    await world.finish_wake(wake)
    return sum(e.kind == "tool.finished" for entries in turn for e in entries), wake.session_id


async def child(
    url: str, tasks: int, seconds: float, turn: list[list[NewEntry]]
) -> tuple[int, float]:
    """Say ready, read the start time, run ``tasks`` replaying tasks until ``seconds``
    after it: (tool steps, when the last one ended)."""
    world = open_world(url)
    done = 0

    async def task(sid: str | None, until: float) -> None:
        """Prompt a session nobody runs (this task's own, then each one it just
        ran: never one in a turn), then run a turn on a due one."""
        nonlocal done
        while time.time() < until:
            if sid is not None:
                await world.append(sid, turn[0], wake=0.0)  # the prompt
            steps, sid = await replay_turn(world, turn)
            done += steps  # not ``done += await ...``: that reads ``done`` before the await

    try:
        await world.read("warm", 0, limit=1)  # connect before the start
        print("ready", flush=True)
        start = float(await asyncio.to_thread(sys.stdin.readline))
        await asyncio.sleep(max(0.0, start - time.time()))
        await asyncio.gather(*(task(f"r{os.getpid()}-{k}", start + seconds) for k in range(tasks)))
        return done, time.time()
    finally:
        await world.close()


if __name__ == "__main__":
    raw = json.loads(Path(sys.argv[4]).read_text())
    replayed = [[NewEntry(kind, data) for kind, data in group] for group in raw]
    steps, ended = asyncio.run(child(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), replayed))
    print(steps, ended)
