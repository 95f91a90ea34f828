"""A fleet of real ``fxworld worker`` processes on one store; prints, never asserts.

    python benchmarks/bench_fleet.py --world WORLD [--workers 1,2,4,8] [--sessions 64]
        [--steps 10] [--concurrency 8]

WORLD is a URL (each worker count gets a fresh ``?namespace=``), or one of
``sqlite`` (several processes, one file), ``postgres``, ``pgbouncer`` (PostgreSQL
through PgBouncer in transaction mode, ``?pooler=transaction`` with a direct
``listen_url``), ``redis``, ``redis-cluster``: a throwaway server from
tests/support, stopped afterwards.

For each worker count W: W workers (benchmarks/_fleet_agent.py: turns of
``--steps`` no-op tool steps) start and log ready; then ``--sessions`` prompts land
at once (all due together) and the run ends when every turn has finished. Printed:

* steps/s in the steady state: the tool steps finished between the 10th and the
  90th percentile of ``tool.finished`` stamps (the store's), over the time between
  them; the ramp (workers waking to the burst) and the tail (fewer sessions left
  than slots) are left out, as the model predicts a rate, not a start-up; and
  efficiency per worker (steps/s / (W x steps/s at W=1)); ``all`` is the whole run
  (tool steps / seconds from the first prompt to the last ``turn.finished``);
* wake lag, due -> taken: from each prompt's entry to its session's first ``fence``
  entry (both stamped by the store), p50/p99;
* fairness: each session's share of its steps done when half of all steps were
  done (the median ``tool.finished`` time): min, max;
* server connections at most (``pg_stat_activity``, ``CLIENT LIST`` on every node);
* per step, over the same steady window as the rate: the workers' CPU (c), the
  server's CPU (s: its backends, PgBouncer, redis-server, where they run here), both
  sampled every 50 ms from /proc with ``time.time()`` stamps and interpolated at the
  window's ends (the store stamps entries by this machine's clock too: the SQLite
  writer's, PostgreSQL's ``now()``, Redis's ``TIME``); the world's calls per step
  (one per distinct entry stamp, plus take, finish and the replay's read per turn);
  others' load: the runnable threads of every autogroup but the fleet's (scanned
  every 0.1 s, benchmarks/_fleet_share.py), averaged over the window and a scan
  either side, printed as L (their sum) and grp (their groups); and this driver's
  cores in the window (it reads the sessions' progress);
* the capacity model of docs/scaling.md: ``min(W / c, C_W / (c + s), K)``, with
  C_W the fleet's fair share of the cores (``cores_for``: the kernel here shares
  them between autogroups first, so equally among the groups with runnable threads,
  none given more than it has, the fleet's asking for its W workers and the
  server's processes here) less the driver's cores, and K the store's ceiling in
  steps/s: the fleet's own calls of a turn (read from a finished session of the
  first run) replayed without the engine by W processes of ``--concurrency``
  sessions in flight each, the fleet's shape (benchmarks/_fleet_ceiling.py, run
  after the fleets, the same on every backend).
  The workers' polling for wakes is inside c and s in the window, so nothing is
  subtracted for it. Every input is measured in the same run; nothing is fitted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))  # tests.support: throwaway servers

from _fleet_ceiling import store_ceiling, turn_calls  # noqa: E402
from _fleet_cpu import CpuSampler  # noqa: E402
from _fleet_probe import Probe, open_probe  # noqa: E402
from _fleet_share import fair_cores, group_of  # noqa: E402

from fxworld import Agent, open_world  # noqa: E402
from fxworld.testing import ScriptedModel  # noqa: E402
from fxworld_conformance.target import with_namespace  # noqa: E402


def cores_for(r: Result) -> float:
    """Cores the fleet gets on a machine others load: the ``os.cpu_count()`` cores
    shared equally among the autogroups with runnable threads in the steady window
    (others' as counted; the fleet's asking for one core per worker and per server
    process that runs here: 0 for SQLite, 1 for PostgreSQL or Redis, 2 with
    PgBouncer, 3 for the Cluster's masters), none given more than it asks."""
    demands = dict(r.others)
    for group, n in r.ours.items():
        demands[group] = demands.get(group, 0.0) + n
    return fair_cores(os.cpu_count() or 1, demands, set(r.ours))


@dataclass
class Result:
    workers: int
    steps_per_s: float  # in the steady state (10th to 90th percentile of steps)
    overall: float  # steps/s over the whole run
    lags: list[float]  # seconds, due -> taken
    progress: list[float]
    connections: int
    client_cpu: float  # the workers' CPU seconds per step, in the steady window
    server_cpu: float  # the server's CPU seconds per step, in the steady window
    ours: dict[str, float]  # autogroup -> the fleet's processes in it (workers, server)
    calls: float  # calls of the world per step, from the logs
    others: dict[str, float]  # autogroup -> others' runnable threads, in the window
    driver_cpu: float  # cores this driver spent in the steady window
    passed: int  # sessions taken out of due order
    logs: dict[str, list[Any]]  # every session's entries


def start_workers(url: str, n: int, args: argparse.Namespace, tmp: Path) -> list[Worker]:
    env = dict(os.environ, FLEET_STEPS=str(args.steps))
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(REPO), env.get("PYTHONPATH", "")])
    workers = []
    for i in range(n):
        log = tmp / f"worker-{n}-{i}.log"
        with open(log, "wb") as out:
            command = [sys.executable, "-m", "fxworld.cli", "worker", "_fleet_agent:agent"]
            command += ["--world", url, "--concurrency", str(args.concurrency), "-v"]
            popen = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        workers.append(Worker(popen, log))
    return workers


@dataclass
class Worker:
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    async def ready(self) -> None:
        while b"worker ready" not in self.log.read_bytes():
            if self.popen.poll() is not None:
                raise RuntimeError(self.log.read_text())
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        """SIGTERM, then wait for the exit (by its pid, as it was started)."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        await asyncio.to_thread(self.popen.wait)


async def until_finished(world: Any, sids: list[str]) -> dict[str, list[Any]]:
    """Every entry of every session, read as it lands until each turn finished."""
    logs: dict[str, list[Any]] = {sid: [] for sid in sids}
    pending = set(sids)
    while pending:
        await asyncio.sleep(max(0.2, len(pending) / 5000))  # 10,000 sessions: fewer rounds
        for sid in list(pending):
            log = logs[sid]
            log += await world.read(sid, log[-1].seq if log else 0, limit=10_000)
            if log and log[-1].kind == "turn.finished":
                pending.discard(sid)
    return logs


async def run_fleet(base: str, workers: int, args: argparse.Namespace, probe: Probe) -> Result:
    url = with_namespace(base, f"fleet_{uuid.uuid4().hex[:10]}")
    world = open_world(url)
    await world.setup()
    client = Agent(ScriptedModel(["-"]), world=world)
    with tempfile.TemporaryDirectory() as tmp:
        procs = start_workers(url, workers, args, Path(tmp))
        try:
            for p in procs:
                await p.ready()
            return await drive(world, client, procs, workers, args, probe)
        finally:
            await asyncio.gather(*(p.stop() for p in procs))
            await world.close()


async def drive(
    world: Any, client: Agent, procs: list[Worker], workers: int, args: Any, probe: Probe
) -> Result:
    sampler = CpuSampler([p.pid for p in procs], probe.server_pids)
    sampling = asyncio.create_task(sampler.run())
    try:
        logs, peak = await prompt_and_wait(world, client, args.sessions, probe)
    finally:
        sampling.cancel()
    sampler.sample(await probe.server_pids())  # the last, after every step landed
    t0, t1, steps = steady_window(logs)
    used = sampler.between(t0, t1)
    return Result(
        workers=workers,
        steps_per_s=steps / (t1 - t0),
        overall=args.sessions * args.steps / max(span(logs), 1e-6),
        lags=[wake_lag(log) for log in logs.values()],
        progress=progress_at_half(logs, args.steps),
        connections=peak,
        client_cpu=used.workers / steps,
        server_cpu=used.server / steps,
        ours=await our_groups(procs, probe),
        passed=out_of_order(logs),
        calls=sum(len({e.at for e in log}) + 3 for log in logs.values())
        / (args.sessions * args.steps),
        others=used.others,
        driver_cpu=used.driver / (t1 - t0),
        logs=logs,
    )


async def our_groups(procs: list[Worker], probe: Probe) -> dict[str, float]:
    """The fleet's processes by autogroup: each worker, and the server's busy
    processes (``probe.processes``) in the group of its first pid."""
    groups: dict[str, float] = {}
    for p in procs:
        groups[group_of(p.pid)] = groups.get(group_of(p.pid), 0.0) + 1
    pids = await probe.server_pids()
    if pids and probe.processes:
        groups[group_of(pids[0])] = groups.get(group_of(pids[0]), 0.0) + probe.processes
    return groups


async def prompt_and_wait(
    world: Any, client: Agent, sessions: int, probe: Probe
) -> tuple[dict[str, list[Any]], int]:
    """Prompt every session at once, read until every turn finished: the logs and
    the most server connections seen meanwhile."""
    peak = 0
    sids = [f"s{i:05d}" for i in range(sessions)]
    for i in range(0, len(sids), 200):  # a burst of 10,000 in chunks: the pool's queue
        chunk = sids[i : i + 200]
        await asyncio.gather(*(client.session(sid).prompt("go").accepted for sid in chunk))
    done = asyncio.create_task(until_finished(world, sids))
    while not done.done():
        peak = max(peak, await probe.connections())
        await asyncio.wait([done], timeout=0.25)
    return done.result(), peak


def out_of_order(logs: dict[str, list[Any]], grain: float = 0.05) -> int:
    """Sessions taken after some session that came due more than ``grain`` seconds
    after them was taken (more than ``grain`` earlier): passed over in the queue."""
    pairs = sorted((_due_taken(log)) for log in logs.values())
    suffix = [float("inf")] * (len(pairs) + 1)  # earliest take among pairs[i:]
    for i in range(len(pairs) - 1, -1, -1):
        suffix[i] = min(suffix[i + 1], pairs[i][1])
    passed, j = 0, 0
    for due, taken in pairs:
        while j < len(pairs) and pairs[j][0] <= due + grain:
            j += 1
        passed += suffix[j] < taken - grain
    return passed


def _due_taken(log: list[Any]) -> tuple[float, float]:
    prompt = next(e for e in log if e.kind == "prompt")
    fence = next(e for e in log if e.kind == "fence" and e.seq > prompt.seq)
    return prompt.at.timestamp(), fence.at.timestamp()


def span(logs: dict[str, list[Any]]) -> float:
    """Seconds from the first prompt to the last ``turn.finished``, by the store's
    stamps (not by when this process polled them)."""
    first = min(e.at for log in logs.values() for e in log if e.kind == "prompt")
    last = max(e.at for log in logs.values() for e in log if e.kind == "turn.finished")
    return (last - first).total_seconds()


def steady_window(logs: dict[str, list[Any]]) -> tuple[float, float, int]:
    """The 10th and 90th percentile of ``tool.finished`` stamps (seconds since the
    epoch) and the tool steps finished between them."""
    ats = sorted(e.at for log in logs.values() for e in log if e.kind == "tool.finished")
    first, last = len(ats) // 10, len(ats) * 9 // 10
    t0, t1 = ats[first].timestamp(), ats[last].timestamp()
    return t0, max(t1, t0 + 1e-6), last - first


def wake_lag(log: list[Any]) -> float:
    """Seconds from the prompt (due at once) to the first fence (taken)."""
    due, taken = _due_taken(log)
    return max(0.0, taken - due)


def progress_at_half(logs: dict[str, list[Any]], steps: int) -> list[float]:
    """Each session's share of its steps done when half of all steps were done."""
    finished = {sid: [e.at for e in log if e.kind == "tool.finished"] for sid, log in logs.items()}
    mid = statistics.median_low(at for ats in finished.values() for at in ats)
    return [sum(1 for at in ats if at <= mid) / steps for ats in finished.values()]


def predict(r: Result, ceiling: dict[int, float]) -> float:
    """The capacity model: W processes each bound by its own CPU per step, all of
    them and the server bound by their share of the cores (less the driver's), and
    the store by its ceiling K in steps/s (the fleet's calls replayed)."""
    w, c, s = r.workers, r.client_cpu, r.server_cpu
    cores = max(0.01, cores_for(r) - r.driver_cpu)
    return min(w / max(c, 1e-9), cores / max(c + s, 1e-9), ceiling[w])


def print_row(r: Result, one: Result, ceiling: dict[int, float]) -> None:
    lag = r.lags
    eff = r.steps_per_s / (r.workers * one.steps_per_s)
    pred = predict(r, ceiling)
    print(
        f"{r.workers:>3} {r.steps_per_s:>8,.0f} {r.overall:>6,.0f} {eff:>5.0%} "
        f"{pct(lag, 50):>8.0f} {pct(lag, 99):>8.0f} "
        f"{min(r.progress):>5.0%}-{max(r.progress):<5.0%} {r.connections:>5} "
        f"{r.client_cpu * 1000:>6.2f} {r.server_cpu * 1000:>6.2f} "
        f"{r.calls:>6.1f} {sum(r.others.values()):>5.1f} {len(r.others):>3} {cores_for(r):>4.2f} "
        f"{r.driver_cpu:>5.2f} {ceiling[r.workers]:>6,.0f} "
        f"{pred:>8,.0f} {r.steps_per_s / pred:>5.0%}",
        flush=True,
    )


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000


HEADER = (
    "  W   steps/s    all  eff  lag p50  lag p99  progress@½  conns  cpu/st srv/st  st/st"
    "     L grp  C_W drvr      K   predict  meas"
)


async def bench(base: str, args: argparse.Namespace, probe: Probe) -> None:
    print(f"{os.cpu_count()} cores; {args.sessions} sessions x {args.steps} tool steps,")
    print(f"concurrency {args.concurrency}; the fleets first, then the store's ceiling K")
    results = []
    for w in args.workers:
        load = os.getloadavg()[0]
        results.append(await run_fleet(base, w, args, probe))
        print(f"  W = {w}: load average {load:.1f} before")
    turn = turn_calls(next(iter(results[0].logs.values())))
    ceiling = await store_ceiling(base, args.concurrency, args.workers, turn)
    print(f"K: the fleet's calls replayed by W processes x {args.concurrency} sessions, steps/s")
    print("(lag in ms; cpu/st, srv/st: client and server CPU ms per step, steady window;")
    print(" st/st: calls; L, grp: others' runnable threads and their autogroups, C_W: the")
    print(" fleet's fair share of the cores, drvr: this driver's cores, all in the window)")
    print(HEADER)
    for result in results:
        print_row(result, results[0], ceiling)
        print(f"      taken out of due order (50 ms grain): {result.passed} of {args.sessions}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world", required=True)
    parser.add_argument(
        "--workers", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4, 8]
    )
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    with open_probe(args.world) as (base, make_probe):
        print(f"world: {args.world}")
        asyncio.run(with_probe(base, args, make_probe))


async def with_probe(base: str, args: argparse.Namespace, make_probe: Callable[[], Any]) -> None:
    probe = await make_probe()
    try:
        await bench(base, args, probe)
    finally:
        await probe.close()


if __name__ == "__main__":
    main()
