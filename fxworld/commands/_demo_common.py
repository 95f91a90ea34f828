"""What both demos share (``fxworld demo`` and ``fxworld demo --model``): the
temporary world, the worker processes and how their records are shown."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fxworld import Agent
    from fxworld.protocol import World

LEASE = 2.0
"""The workers' lease: a dead worker's session is taken over once it runs out."""


def say(text: str = "", indent: int = 0) -> None:
    pad = " " * indent
    for line in text.split("\n"):
        print(pad + line if line else "", flush=True)


def short(xid: str) -> str:
    return xid[:8]


class DemoWorker:
    def __init__(self, n: int, proc: asyncio.subprocess.Process, log: Path) -> None:
        self.n, self.proc, self.log = n, proc, log

    @property
    def pid(self) -> int:
        return self.proc.pid

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""


async def start_worker(
    n: int, url: str, work: Path, pause: str | None, model: str | None = None
) -> DemoWorker:
    env = dict(os.environ, FXWORLD_DEMO_DIR=str(work))
    env.pop("FXWORLD_DEMO_PAUSE", None)
    env.pop("FXWORLD_TEST_CRASH_AT", None)
    env.pop("FXWORLD_DEMO_MODEL", None)
    if pause:
        env["FXWORLD_DEMO_PAUSE"] = pause
    if model:
        env["FXWORLD_DEMO_MODEL"] = model
    log = work / f"worker-{n}.log"
    with open(log, "wb") as out:  # noqa: ASYNC230 (a local file, opened once)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "fxworld.cli", "worker",
            "fxworld.commands._demo_agent:agent", "--world", url, "--lease", str(LEASE),
            stdout=out, stderr=asyncio.subprocess.STDOUT, env=env, cwd=work,
        )  # fmt: skip
    return DemoWorker(n, proc, log)


async def wait_file(path: Path, worker: DemoWorker, limit: float = 20.0) -> None:
    end = time.monotonic() + limit
    while not path.exists():  # noqa: ASYNC240 (a local file, polled)
        if worker.proc.returncode is not None:
            raise RuntimeError(f"worker #{worker.n} exited early:\n{worker.tail()}")
        if time.monotonic() > end:
            raise RuntimeError(f"worker #{worker.n} never got to {path.name}:\n{worker.tail()}")
        await asyncio.sleep(0.02)


async def kill(worker: DemoWorker) -> float:
    worker.proc.send_signal(signal.SIGKILL)
    await worker.proc.wait()
    return time.time()


def tool_runs(work: Path) -> list[dict[str, Any]]:
    f = work / "runs.jsonl"
    return [json.loads(x) for x in f.read_text().splitlines() if x] if f.exists() else []


def describe(kind: str, data: dict[str, Any]) -> str:
    if kind == "prompt":
        return repr(data.get("text"))
    if kind == "fence":
        return f"a worker took over (epoch {data.get('epoch')})"
    if kind == "message":
        calls = data.get("tool_calls") or []
        if calls:
            return "model asks for " + ", ".join(
                f"{c['name']} (execution_id {short(c['execution_id'])})" for c in calls
            )
        return "model's final message"
    if kind in ("tool.started", "tool.finished", "tool.interrupted"):
        extra = f", attempt {data['attempt']}" if kind == "tool.started" else ""
        if kind == "tool.finished":
            out = str(data.get("output"))
            extra = f" -> {out if len(out) <= 36 else out[:33] + '...'}"
        return f"{data.get('name')} {short(str(data.get('execution_id')))}{extra}"
    if kind == "text":
        text = str(data.get("text"))
        return repr(text if len(text) <= 44 else text[:41] + "...")
    if kind == "turn.started":
        return f"answering the prompt at position {data.get('prompt')}"
    if kind == "turn.finished":
        return "the turn is over"
    if kind == "turn.yielded":
        return str(data.get("reason"))
    return ""


def set_up() -> tuple[Path, str, World, Agent]:
    """A temporary directory, the SQLite world in it (its URL too), and the
    client's agent on that world (its model is never called)."""
    from fxworld import Agent, open_world
    from fxworld.testing import ScriptedModel

    work = Path(tempfile.mkdtemp(prefix="fxworld-demo-"))
    url = f"sqlite:///{work}/world.db"
    world = open_world(url)
    client = Agent(ScriptedModel(["(the client never calls the model)"]), world=world)
    return work, url, world, client


async def clean_up(workers: list[DemoWorker], world: World, work: Path, *, keep: bool) -> None:
    """Stop the workers still running, close the world, remove ``work`` unless kept."""
    for w in workers:
        if w.proc.returncode is None:
            w.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(w.proc.wait(), 10)
            except TimeoutError:
                w.proc.kill()
    await world.close()
    if keep:
        say(f"(kept {work})")
    else:
        shutil.rmtree(work, ignore_errors=True)
