"""Benchmark the turn engine on the embedded SQLite world; prints, never asserts.

    python benchmarks/bench_engine.py [--steps 200] [--long 10000] [--rounds 3] [--otel]

1. Engine overhead per step: a turn of N tool calls (a no-op tool) and a scripted
   model that answers at once, run in-process, next to the time of the same
   number of raw fenced appends. A tool step (the model's reply with its call's
   ``tool.started``, then ``tool.finished``) is 2 appends of 3 entries.
   Also: the time per tool step of one turn of ``--long`` steps, near its start
   (steps 1-200) and near its end (the last 200): it must stay flat (target: at
   most +10%).
2. SIGKILL -> continuing: a worker is SIGKILLed while the model's text streams;
   a second worker, already polling, takes over when the 2 s lease runs out.
   Measured from the kill to the second worker's takeover entry (target: within
   lease + 1 s).
   Also (``--cpu-only`` prints only this): the engine's own client CPU per tool
   step, on MemoryWorld (the world answers from memory, so what is left is the
   engine and the world's validation), at 1 and 8 flows of an async no-op tool:
   process CPU time, which a shared machine's load moves less than wall time.
3. SIGTERM -> continuing: the same, with SIGTERM: the worker stops at once, hands
   the session back, and the other continues (target: under 1 s).
4. ``--otel`` (prints only this): the CPU per tool step of (1), in a fresh process
   each: OpenTelemetry never imported; imported with no provider set; the SDK's
   tracer and meter providers set (spans to the in-memory exporter, cleared
   between rounds): what tracing costs, against the first.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from fxworld import Agent, Fence, MemoryWorld, NewEntry, SqliteWorld, tool
from fxworld.models.base import ModelEvent, ModelRequest, ModelResponse, ToolCall
from fxworld.testing import ScriptedModel

HERE = Path(__file__).parent
LEASE = 2.0


async def raw_appends(path: Path, n: int) -> float:
    """Seconds per fenced single-entry append, as the engine makes them."""
    world = SqliteWorld(path, namespace="raw")
    await world.setup()
    fence: Fence = await world.acquire("s")
    data = {"v": 1, "execution_id": "x" * 32, "name": "noop", "output": "ok", "is_error": False}
    t0 = time.perf_counter()
    for _ in range(n):
        await world.append("s", [NewEntry("tool.finished", data)], fence=fence)
    elapsed = time.perf_counter() - t0
    await world.close()
    return elapsed / n


async def engine_turn(path: Path, steps: int) -> tuple[float, int, int]:
    """Seconds for a turn of ``steps`` tool calls; (seconds, steps run, entries)."""

    @tool(idempotent=True)
    def noop() -> str:
        return "ok"

    world = SqliteWorld(path, namespace="engine")
    replies: list[object] = [{"tool": "noop"} for _ in range(steps)] + ["done"]
    agent = Agent(ScriptedModel(replies), tools=[noop], world=world)  # type: ignore[arg-type]
    turn = agent.session("bench").prompt("go")
    await turn.accepted
    t0 = time.perf_counter()
    await agent.work(until_idle=True, concurrency=1)
    elapsed = time.perf_counter() - t0
    assert await turn == "done"
    entries = await world.read("bench", 0, limit=100_000)
    engine_entries = sum(1 for e in entries if e.epoch is not None)
    # steps: start turn, (model call, tool run) x steps, final model call, finish
    n_steps = 1 + 2 * steps + 1 + 1
    await world.close()
    return elapsed, n_steps, engine_entries


class CountingModel:
    """Calls ``tool`` until the conversation holds ``steps`` results, then answers
    "done"; O(1) per call (ScriptedModel counts the conversation's messages)."""

    name = "counting"

    def __init__(self, steps: int, tool: str = "tick") -> None:
        self.steps = steps
        self.tool = tool

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        n = len(request.messages)  # the prompt, then 2 messages per tool step
        if n > 2 * self.steps:
            yield ModelResponse(text="done", stop_reason="end_turn")
        else:
            call = ToolCall(f"c{n}", self.tool, {})
            yield ModelResponse(tool_calls=(call,), stop_reason="tool_use")


async def long_turn(path: Path, steps: int) -> tuple[float, float, float, float]:
    """Seconds per tool step near the start and near the end of one turn (the
    10th percentile of 200 steps: on a shared machine the median measures the
    load as much as the engine): (wall early, wall late, CPU early, CPU late).
    CPU time is this process's, SQLite's thread included."""
    ticks: list[tuple[float, float]] = []

    @tool(idempotent=True, input_schema={"type": "object", "properties": {}})
    async def tick() -> str:
        ticks.append((time.perf_counter(), time.process_time()))
        return "ok"

    world = SqliteWorld(path, namespace="long")
    agent = Agent(CountingModel(steps), tools=[tick], world=world)
    turn = agent.session("long").prompt("go")
    await turn.accepted
    await agent.work(until_idle=True, concurrency=1)
    assert await turn == "done" and len(ticks) == steps
    await world.close()
    wall = [b[0] - a[0] for a, b in itertools.pairwise(ticks)]
    cpu = [b[1] - a[1] for a, b in itertools.pairwise(ticks)]

    def p10(xs: list[float]) -> float:
        return statistics.quantiles(xs, n=10)[0]

    return p10(wall[:200]), p10(wall[-200:]), p10(cpu[:200]), p10(cpu[-200:])


async def engine_cpu(flows: int, steps: int) -> float:
    """Process CPU seconds per tool step of ``flows`` turns of ``steps`` steps each
    on MemoryWorld, one ``work(concurrency=flows)`` running them."""

    @tool(input_schema={"type": "object", "properties": {}})
    async def tick() -> str:
        return "ok"

    agent = Agent(CountingModel(steps), tools=[tick], world=MemoryWorld())
    turns = [agent.session(f"cpu-{k}").prompt("go") for k in range(flows)]
    for t in turns:
        await t.accepted
    cpu = time.process_time()
    await agent.work(until_idle=True, concurrency=flows)
    return (time.process_time() - cpu) / (flows * steps)


async def print_engine_cpu(rounds: int) -> None:
    print("Engine CPU per tool step (MemoryWorld, async no-op tool, median of rounds)")
    for flows in (1, 8):
        await engine_cpu(flows, 50)  # warm up
        figures = [await engine_cpu(flows, 500) for _ in range(max(rounds, 3))]
        shown = ", ".join(f"{f * 1e6:.0f}" for f in figures)
        print(f"  {flows} flow(s)                       {statistics.median(figures) * 1e6:8.1f} us"
              f"  (rounds: {shown})")  # fmt: skip


OTEL_MODES = {
    "off": "OpenTelemetry not imported",
    "api": "imported, no provider set",
    "sdk": "SDK providers set (in-memory)",
}


def set_otel(mode: str) -> object | None:
    """Set up OpenTelemetry as ``mode`` says; the span exporter to clear, if any."""
    if mode == "off":
        return None
    from opentelemetry import metrics, trace

    if mode == "api":
        return None
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    return exporter


async def otel_cpu(mode: str, rounds: int) -> None:
    """In this process (set up as ``mode``): CPU per tool step, each round, in us."""
    exporter = set_otel(mode)
    await engine_cpu(1, 50)  # warm up
    figures = []
    for _ in range(max(rounds, 3)):
        figures.append(await engine_cpu(1, 500))
        if exporter is not None:
            exporter.clear()  # type: ignore[attr-defined]
    print(" ".join(f"{f * 1e6:.1f}" for f in figures))


def print_otel_overhead(rounds: int) -> None:
    print("Tracing: engine CPU per tool step (MemoryWorld, 1 flow, a fresh process each,")
    print("median of rounds; a tool step = 1 chat span + 1 execute_tool span + metrics)")
    base = 0.0
    for mode, label in OTEL_MODES.items():
        out = subprocess.run(
            [sys.executable, __file__, "--otel-mode", mode, "--rounds", str(rounds)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        figures = [float(x) for x in out.stdout.split()]
        median = statistics.median(figures)
        base = base or median
        shown = ", ".join(f"{f:.0f}" for f in figures)
        print(f"  {label:<32} {median:8.1f} us  {median / base:5.2f}x  (rounds: {shown})")


async def start_worker(url: str, log: Path) -> asyncio.subprocess.Process:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    )
    with open(log, "ab") as out:  # noqa: ASYNC230 (a local log file, opened once)
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "fxworld.cli", "worker", "_engine_bench_agent:agent",
            "--world", url, "--lease", str(LEASE), "-v",
            stdout=out, stderr=asyncio.subprocess.STDOUT, env=env,
        )  # fmt: skip


def read(log: Path) -> str:
    return log.read_text(errors="replace") if log.exists() else ""


async def wait_log(log: Path, needle: str, limit: float = 30.0) -> None:
    end = time.monotonic() + limit
    while needle not in read(log):
        if time.monotonic() > end:
            raise RuntimeError(f"worker never logged {needle!r}:\n{read(log)}")
        await asyncio.sleep(0.02)


async def takeover(tmp: Path, sig: int, rounds: int) -> list[float]:
    """Seconds from ``sig`` to the other worker's fence entry, per round."""
    figures: list[float] = []
    for r in range(rounds):
        url = f"sqlite:///{tmp}/takeover-{sig}-{r}.db"
        world = SqliteWorld(tmp / f"takeover-{sig}-{r}.db")
        client = Agent(ScriptedModel(["-"]), world=world)
        logs = [tmp / f"worker-{sig}-{r}-{i}.log" for i in (0, 1)]
        procs = [await start_worker(url, logs[0]), await start_worker(url, logs[1])]
        for log in logs:
            await wait_log(log, "worker ready")
        turn = client.session().prompt("talk")
        sid = (await turn.accepted).session_id
        while True:  # wait for text to stream, then find who holds the session
            entries = await world.read(sid, 0)
            if any(e.kind == "text" for e in entries):
                break
            await asyncio.sleep(0.02)
        holder = next(
            p for p, log in zip(procs, logs, strict=True) if f"session {sid}: taken" in read(log)
        )
        os.kill(holder.pid, sig)
        sent = time.time()
        await holder.wait()
        await asyncio.wait_for(turn, 60)
        entries = await world.read(sid, 0, limit=10_000)
        fences = [e for e in entries if e.kind == "fence"]
        figures.append(fences[1].at.timestamp() - sent)
        for p in procs:
            if p.returncode is None:
                p.send_signal(signal.SIGTERM)
                await p.wait()
        await world.close()
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="tool calls in the turn")
    parser.add_argument("--long", type=int, default=10_000, help="tool steps of the long turn")
    parser.add_argument("--rounds", type=int, default=3, help="takeovers measured")
    parser.add_argument("--cpu-only", action="store_true", help="only the engine's CPU per step")
    parser.add_argument("--otel", action="store_true", help="only what tracing costs per step")
    parser.add_argument("--otel-mode", choices=list(OTEL_MODES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.otel_mode:
        await otel_cpu(args.otel_mode, args.rounds)
        return
    if args.otel:
        print_otel_overhead(args.rounds)
        return
    await print_engine_cpu(args.rounds)
    if args.cpu_only:
        return
    with tempfile.TemporaryDirectory(prefix="fxworld-bench-engine-") as d:
        tmp = Path(d)
        raw = await raw_appends(tmp / "raw.db", 500)
        elapsed, steps, entries = await engine_turn(tmp / "engine.db", args.steps)
        per_tool_step = elapsed / args.steps
        print("Engine on SQLite (one process, scripted model, no-op tool)")
        print(f"  raw fenced append                 {raw * 1000:8.3f} ms")
        print(f"  a turn of {args.steps} tool steps ({steps} engine steps, {entries} entries)")
        print(f"    wall time per tool step         {per_tool_step * 1000:8.3f} ms")
        print(f"      = raw appends                 {per_tool_step / raw:8.2f}")
        early, late, cpu_early, cpu_late = await long_turn(tmp / "long.db", args.long)
        print(f"  one turn of {args.long} tool steps, per tool step (p10; target <= +10%)")
        print("                                        wall       CPU")
        print(f"    steps 1-200                     {early * 1000:8.3f} {cpu_early * 1000:8.3f} ms")
        print(
            f"    last 200 steps                  {late * 1000:8.3f} {cpu_late * 1000:8.3f} ms"
            f"  (wall {late / early - 1:+.0%}, CPU {cpu_late / cpu_early - 1:+.0%})"
        )
        print()
        kill = await takeover(tmp, signal.SIGKILL, args.rounds)
        print(f"SIGKILL -> another worker continues (lease {LEASE:g} s; target <= {LEASE + 1:g} s)")
        print(
            "  "
            + "  ".join(f"{x:.2f} s" for x in kill)
            + f"   median {statistics.median(kill):.2f} s"
        )
        term = await takeover(tmp, signal.SIGTERM, args.rounds)
        print("SIGTERM -> another worker continues (target < 1 s)")
        print(
            "  "
            + "  ".join(f"{x * 1000:.0f} ms" for x in term)
            + f"   median {statistics.median(term) * 1000:.0f} ms"
        )


if __name__ == "__main__":
    asyncio.run(main())
