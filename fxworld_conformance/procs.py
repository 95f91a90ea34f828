"""Tier 2: real OS processes race on shared sessions under crashes and cut connections.

:func:`run_process_checks` runs a seeded workload (see
:mod:`fxworld_conformance._child` for the roles: writers taking sessions over and
appending fenced batches, prompters appending keyed prompts, followers that
reconnect, readers, wake workers with short leases, pokers) against the world under
test while it injects faults at seeded moments:

``kill``
    ``SIGKILL`` a process (a crashed worker); a fresh one takes its place.
``stop``
    ``SIGSTOP`` a process for longer than a lease, then ``SIGCONT``: a zombie
    writer or worker that wakes up after its successor wrote, and must be refused.
``kill_inside``
    wait until an ``atomic`` process (keyed batches with ``wake=``) has started an
    append, then ``SIGKILL`` it a few milliseconds later: inside the call, where a
    world that writes the entries, the key and the wake in several steps leaves
    half of them. The kit then retries every interrupted keyed append with its key.
``stop_inside``
    the same with ``SIGSTOP`` inside a writer's fenced append, held longer than a
    lease: a world that checks the fence and writes in a second step lets the
    zombie's write land after its successor's takeover.
``cut`` / ``stall``
    abort every connection (refusing new ones for a moment) or hold every byte for
    a while, through :class:`~fxworld_conformance.proxy.TcpProxy`, for worlds
    reached over TCP (a URL with ``host:port``, or an ``endpoint_url`` with one).
``restart``
    crash-restart the server through ``Target.restart`` (capability
    ``restartable``).

Processes open the world by URL with one shared namespace when the world has the
capability ``shared`` and the target is a URL. Otherwise (``memory://``, or a world
given only by a factory, which makes a fresh world per call) the same workload runs
as concurrent tasks in this process on one world; crashes are then cancelled tasks
and freezes hold a task between two operations.

After the workload the kit waits for every lease and due time, takes every wake
left (the *drain*), runs a few deterministic probes that the random workload may
miss (a wake asked for during a lease, a delayed wake, a lease left to expire and
its worker's old fence, a second take during a lease, a stale writer, a keyed
retry, four concurrent batches, a stale ``expect``, a never-written session, an
append's own wake), drains again and reads every log. The checkers of
:mod:`fxworld_conformance.checkers` then judge the whole history, one report row
each; a failure prints the operations that prove it and the faults injected
around then. With ``Target.restart`` a last check writes, crash-restarts the
server and verifies that acknowledged appends, keys, fences and pending wakes
survived.

Repeatable: the seed fixes the fault schedule and every process's choices (roles,
sessions, batch sizes, pauses); the operating system still chooses the exact
interleaving, which is why every operation is recorded and judged afterwards.
Failures print the seed. Assumes the world's clock (a server's) and the kit's
agree within :data:`~fxworld_conformance.history.CLOCK_TOLERANCE`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import Any, TypeVar

from fxworld.errors import ConfigurationError, WorldError
from fxworld.protocol import World
from fxworld.types import Fence, WakeLease
from fxworld_conformance import history as hist
from fxworld_conformance._child import Gate, Spec, run_role
from fxworld_conformance.checkers import CHECKS, check_errors_typed
from fxworld_conformance.history import (
    Done,
    EntryDict,
    Finding,
    History,
    ListSink,
    Op,
    Recorder,
    batch_entries,
    entry_dicts,
    fence_dict,
    lease_dict,
    load_records,
    read_record_file,
)
from fxworld_conformance.profiles import PROFILES as KIT_PROFILES
from fxworld_conformance.profiles import ProcessProfile as Profile
from fxworld_conformance.profiles import profile as kit_profile
from fxworld_conformance.proxy import TcpProxy, proxied_url, upstream_of
from fxworld_conformance.report import CheckResult, kit_error
from fxworld_conformance.target import Target, with_namespace

__all__ = ["run_process_checks", "PROFILES", "Profile", "ProcessRun", "run_workload"]

T = TypeVar("T")


PROFILES: dict[str, Profile] = {name: p.processes for name, p in KIT_PROFILES.items()}
"""Profile name -> how hard the process tier pushes (from
:data:`fxworld_conformance.profiles.PROFILES`)."""

ROW = "processes: "
"""Prefix of every row name of this tier."""

RESTART_ROW = ROW + "acknowledged appends and pending wakes survive a restart"

_PROBE_SESSIONS = (
    "kit-probe-finish",
    "kit-probe-early",
    "kit-probe-lease",
    "kit-probe-twice",
    "kit-probe-stale",
    "kit-probe-key",
    "kit-probe-empty",
    "kit-probe-append-wake",
    "kit-probe-batches",
)


@dataclass
class ProcessRun:
    """What one workload produced: the history and what was done to it."""

    history: History
    mode: str
    """``processes`` or ``tasks``."""
    faults: Counter[str] = field(default_factory=Counter)
    processes: int = 0
    """Processes (or tasks) started, replacements included."""
    crashed: list[str] = field(default_factory=list)
    """Processes that exited on their own with an error (kit or environment
    trouble), with the end of their stderr."""
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    capabilities: frozenset[str] = frozenset()
    """The world's capabilities with the target's extra ones."""
    fault_log: list[Op] = field(default_factory=list)
    """Each fault applied, as an operation of the process ``kit (faults)``."""
    unreadable: Finding | None = None
    """Set when the world could not be read back after the run: the history
    cannot be judged, and this says why, with the failing operations."""


def run_process_checks(target: Target, *, profile: str, seed: int) -> list[CheckResult]:
    """Run the process tier against ``target``; one :class:`CheckResult` per check.

    Synchronous: runs its own event loop (in a helper thread if the caller's thread
    already runs one). ``profile`` is ``ci``, ``thorough`` or ``quick``; ``seed``
    makes the workload and the fault schedule repeatable.
    """
    return _run_sync(_process_checks(target, kit_profile(profile).processes, seed))


async def _process_checks(target: Target, prof: Profile, seed: int) -> list[CheckResult]:
    started = time.monotonic()
    rows: list[CheckResult] = []
    runs: list[ProcessRun] = []
    try:
        for k in range(prof.rounds):
            runs.append(await run_workload(target, prof, seed + 7919 * k))
    except Unopenable as e:
        return [_unjudgeable_row([e.finding], seed, time.monotonic() - started)]
    for run in runs:
        if run.unreadable is not None:
            found = [run.unreadable, *check_errors_typed(run.history)]
            return [_unjudgeable_row(found, seed, time.monotonic() - started, run.history.t0)]
    mode, caps = runs[0].mode, runs[0].capabilities
    faults: Counter[str] = Counter()
    for run in runs:
        faults.update(run.faults)
    ops = sum(len(run.history.ops) for run in runs)
    extra: dict[str, Any] = {
        "mode": mode,
        "seed": seed,
        "faults": dict(faults),
        "processes": sum(run.processes for run in runs),
        "zombie_refusals": sum(_zombie_refusals(run) for run in runs),
        "notes": [n for run in runs for n in run.notes],
    }
    seconds = time.monotonic() - started
    for check in CHECKS:
        violations: list[tuple[History, Finding]] = []
        try:
            for run in runs:
                if check.needs_drain and not run.history.drained:
                    continue
                violations.extend((run.history, v) for v in check.run(run.history))
        except Exception as e:  # a checker's bug: the kit's, not the world's
            rows.append(kit_error(ROW + check.name, e))
            continue
        rows.append(_row(check.name, check.guarantees, violations, ops, seconds, extra, seed))
    rows.append(_progress_row(runs, ops, seconds, extra))
    crashed = [crash for run in runs for crash in run.crashed]
    if crashed:
        rows.append(
            CheckResult(
                ROW + "every process ran to its end",
                (),
                "error",
                "kit error (a failure of the kit or its environment, not of the world): "
                "a process of the workload exited on its own:\n" + "\n".join(crashed),
                extra=dict(extra),
            )
        )
    rows.extend(_skipped_rows(target, caps, mode))
    if target.restart is not None:
        rows.append(await _restart_check(target, prof, seed))
    return rows


def _unjudgeable_row(
    found: list[Finding], seed: int, seconds: float, t0: float = 0.0
) -> CheckResult:
    broken = sorted({v.guarantee for v in found}, key=lambda g: int(g[1:]))
    return CheckResult(
        ROW + "run and read back the history",
        tuple(broken),
        "failed",
        "\n".join(v.render(t0) for v in found) + f"\n(seed {seed}: the history cannot be judged)",
        seconds=seconds,
        extra={"seed": seed, "violated": broken},
    )


def _row(
    name: str,
    guarantees: tuple[str, ...],
    found: list[tuple[History, Finding]],
    ops: int,
    seconds: float,
    extra: dict[str, Any],
    seed: int,
) -> CheckResult:
    if not found:
        return CheckResult(ROW + name, guarantees, "passed", "", 0, ops, seconds, dict(extra))
    shown = [v.render(h.t0) + _faults_near(h, v) for h, v in found[:3]]
    more = f"\n... and {len(found) - 3} more" if len(found) > 3 else ""
    detail = (
        f"{len(found)} violation(s) in a {extra['mode']} run, seed {seed} "
        f"(replay: run_process_checks(target, profile=..., seed={seed})); times in seconds "
        "from the start of the run:\n" + "\n".join(shown) + more
    )
    broken = sorted({v.guarantee for _, v in found}, key=lambda g: int(g[1:]))
    row_extra = dict(extra)
    row_extra["violated"] = broken
    return CheckResult(ROW + name, guarantees, "failed", detail, 0, ops, seconds, row_extra)


FAULTS = "kit (faults)"
"""The process name under which applied faults are recorded in a history."""


def _faults_near(h: History, v: Finding) -> str:
    """The faults applied shortly before or while the violation's operations ran."""
    timed = [op for op in v.ops if math.isfinite(op.start)]
    if not timed:
        return ""
    lo = min(op.start for op in timed) - 3.0
    hi = max(op.done if math.isfinite(op.done) else op.start for op in timed)
    near = [op for op in h.ops if op.process == FAULTS and lo <= op.start <= hi]
    if not near:
        return ""
    return "\n  faults injected around then:\n" + "\n".join(
        "    " + op.describe(h.t0) for op in near[-6:]
    )


def _zombie_refusals(run: ProcessRun) -> int:
    """Fenced appends by a frozen process within a second of waking up: the zombie
    writers (and workers) the kit made, refused as they must be."""
    count = 0
    for fault in run.fault_log:
        if fault.op != "stop":
            continue
        woke = fault.start + float(fault.args.get("seconds") or 0.0)
        victim = fault.args.get("victim")
        count += sum(
            1
            for op in run.history.ops
            if op.process == victim
            and op.op == "append"
            and op.error == "Fenced"
            and woke <= op.start <= woke + 1.0
        )
    return count


def _progress_row(
    runs: list[ProcessRun], ops: int, seconds: float, extra: dict[str, Any]
) -> CheckResult:
    """Safety checks pass vacuously on a world that does nothing: make sure every
    role got work done, and no process died on its own."""
    problems: list[str] = []
    for run in runs:
        h = run.history
        ok = Counter(
            (op.process.split("-", 1)[0], op.op)
            for op in h.ops
            if op.outcome == "ok" and (op.op != "take_wake" or op.result)
        )
        follows = sum(len(op.result or []) for op in h.ops if op.op == "follow")
        wants = {
            ("writer", "acquire"): "W1: no writer ever acquired a session",
            ("writer", "append"): "W2: no fenced append of a writer succeeded",
            ("prompter", "append"): "W3: no unfenced prompt was accepted",
            ("atomic", "append"): "W4: no keyed batch with a wake was accepted",
            ("reader", "read"): "W9: no read succeeded",
            ("worker", "take_wake"): "W12: no worker ever took a wake",
        }
        for key, why in wants.items():
            if ok[key] == 0:
                problems.append(why)
        if follows == 0:
            problems.append("W10: no follower ever saw an entry")
    if problems:
        return CheckResult(
            ROW + "every role made progress",
            ("W1", "W3", "W10", "W12"),
            "failed",
            "\n".join(dict.fromkeys(problems)),
            0,
            ops,
            seconds,
            dict(extra),
        )
    return CheckResult(
        ROW + "every role made progress",
        ("W1", "W3", "W10", "W12"),
        "passed",
        "",
        0,
        ops,
        seconds,
        dict(extra),
    )


def _skipped_rows(target: Target, caps: frozenset[str], mode: str) -> list[CheckResult]:
    rows = []
    if mode == "tasks":
        why = (
            "world lacks capability 'shared'"
            if "shared" not in caps
            else "world given by a factory (a fresh world per call), not a URL"
        )
        rows.append(
            CheckResult(
                ROW + "racing OS processes, SIGKILL and SIGSTOP",
                ("W2", "W4", "W8", "W12"),
                "skipped",
                f"{why}: the workload ran as concurrent tasks in one process "
                "(crashes simulated by cancelling tasks, freezes by pausing them)",
            )
        )
    if target.url is None or upstream_of(target.url) is None:
        why = (
            "the world is not reached over TCP by URL (no host:port in the URL): "
            "there is no connection to cut"
        )
    elif mode == "tasks":
        why = "the workload ran as tasks on one world object: no per-process connection to cut"
    else:
        why = ""
    if why:
        rows.append(
            CheckResult(ROW + "cut and stalled connections", ("W4", "W6", "W16"), "skipped", why)
        )
    if target.restart is None:
        why = (
            "capability 'restartable' declared but the target has no restart()"
            if "restartable" in caps
            else "needs capability 'restartable' (a Target.restart that crash-restarts the server)"
        )
        rows.append(CheckResult(RESTART_ROW, ("W4", "W7", "W12"), "skipped", why))
    return rows


# -- the workload ---------------------------------------------------------------------


async def run_workload(
    target: Target, prof: Profile, seed: int, caps: frozenset[str] | None = None
) -> ProcessRun:
    """Run one seeded workload with faults; return its history, drained and read."""
    rng = random.Random(seed)
    namespace = target.fresh_namespace()
    world = await _reopen(target, namespace, prof.op_timeout, retry_for=0.0)
    if caps is None:
        caps = frozenset(world.capabilities) | target.extra_capabilities
    use_processes = target.url is not None and "shared" in caps
    sessions = [f"kit-s{k}" for k in range(prof.sessions)]
    t0 = time.time()
    sink = ListSink()
    run = ProcessRun(History([], {}, t0), "processes" if use_processes else "tasks")
    run.capabilities = caps
    tmp = tempfile.mkdtemp(prefix="fxk-procs-")
    record_files: list[str] = []
    harness: _Harness | None = None
    try:
        if use_processes:
            assert target.url is not None
            url = with_namespace(target.url, namespace)
            upstream = upstream_of(url)
            proxy = TcpProxy(*upstream) if upstream is not None else None
            child_url = url
            if proxy is not None:
                child_url = proxied_url(url, await proxy.start())
            schedule = _schedule(
                rng,
                prof,
                can_cut=proxy is not None,
                can_restart=target.restart is not None,
            )
            harness = _ProcessHarness(child_url, tmp, record_files, proxy, target)
        else:
            schedule = _schedule(
                rng,
                prof,
                can_cut=False,
                can_restart=target.restart is not None,
            )
            harness = _TaskHarness(world, sink, target)
        deadline = time.time() + harness.startup + prof.duration  # tasks start at once
        slots = [(role, k) for role, count in prof.roles.items() for k in range(count)]
        for n, (role, k) in enumerate(slots):
            spec = Spec(
                role,
                f"{role}-{k}",
                sessions,
                seed * 1000 + n,
                deadline,
                prof.lease,
                prof.op_timeout,
                prof.pace,
            )
            await harness.spawn(spec)
        deadline = await harness.go(prof.duration, run)
        start = deadline - prof.duration
        await _apply_faults(harness, schedule, start, deadline, rng, run)
        await harness.finish(deadline + prof.op_timeout + 2.0, run)
        run.processes = harness.started
    finally:
        if harness is not None:
            await harness.cleanup()
        records = list(sink.records)
        for path in record_files:
            records.extend(read_record_file(path))
        if not os.environ.get("FXWORLD_KIT_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    ops = load_records(records)
    if use_processes:  # a fresh, direct connection (the server may have restarted)
        with contextlib.suppress(Exception):
            await world.close()
        world = await _reopen(target, namespace, prof.op_timeout)
    kit_sink = ListSink()
    kit = Recorder("kit", kit_sink)
    # Leases of killed workers expire, delayed wakes come due; then take what is left.
    await asyncio.sleep(prof.lease + 0.7)
    drained = await _drain(world, kit, prof)
    landed_first = await _retry_interrupted(world, kit, prof, ops)
    await _probes(world, kit, prof)
    await asyncio.sleep(max(prof.lease, 0.8) + 0.3)
    drained = await _drain(world, kit, prof) and drained
    final: dict[str, list[EntryDict]] = {}
    written = {op.session for op in ops if op.op == "append" and op.session is not None}
    for sid in dict.fromkeys([*sessions, *_PROBE_SESSIONS, *sorted(written)]):
        log = await _read_all(world, sid, kit, prof)
        if isinstance(log, Finding):
            run.unreadable = log
            break
        final[sid] = log
    with contextlib.suppress(Exception):
        await world.close()
    ops.extend(load_records(kit_sink.records))
    ops.extend(run.fault_log)
    ops.sort(key=lambda o: (o.start, o.id))
    run.history = History(ops, final, t0, drained, landed_first)
    run.seconds = time.time() - t0
    return run


_STOP_ROLES: tuple[tuple[str, ...], ...] = (("writer",), ("worker",))
"""Frozen in turn: a zombie writer, then a zombie worker."""


@dataclass(frozen=True)
class _Fault:
    at: float
    kind: str
    pick: int
    seconds: float
    roles: tuple[str, ...] = ()
    """Whom it may hit (empty: any role that the kind allows)."""
    inside: float = 0.0
    """For ``kill_inside``/``stop_inside``: seconds after the call started."""


INSIDE_ROLES = {"kill_inside": ("atomic",), "stop_inside": ("writer",)}
"""Whose calls a fault inside a call hits."""

INSIDE_WAIT = 3.0
"""Seconds a fault inside a call waits for its victim to start one."""


def inside_call(record: dict[str, Any] | None, kind: str) -> bool:
    """Whether ``record`` (a process's last) starts a call that ``kind`` hits:
    an append with a wake, a key or several entries (``kill_inside``), or a fenced
    append (``stop_inside``)."""
    if record is None or record.get("e") != "s" or record.get("op") != "append":
        return False
    args = record.get("a") or {}
    if kind == "stop_inside":
        return args.get("fence") is not None
    return args.get("wake") is not None or args.get("key") is not None or args.get("n", 1) > 1


def _schedule(
    rng: random.Random, prof: Profile, *, can_cut: bool, can_restart: bool
) -> list[_Fault]:
    kinds = ["kill", "stop", "kill_inside", "kill_inside", "stop_inside"]
    kinds += ["cut", "stall"] if can_cut else []
    faults: list[_Fault] = []
    t = rng.uniform(*prof.fault_gap)
    while t < prof.duration - 0.5:
        kind = rng.choice(kinds)
        inside = rng.uniform(0.0, 0.06)
        if kind in ("stop", "stop_inside"):
            seconds = rng.uniform(prof.lease * 1.3, prof.lease * 2.5)
        elif kind == "stall":
            seconds = rng.uniform(0.2, prof.op_timeout * 1.2)
        elif kind == "cut":
            seconds = rng.choice([0.0, 0.0, rng.uniform(0.1, 0.6)])
        else:
            seconds = 0.0
        roles: tuple[str, ...] = ()
        if kind == "stop":  # zombies: frozen writers and workers, in turn
            roles = _STOP_ROLES[sum(f.kind == "stop" for f in faults) % len(_STOP_ROLES)]
        roles = INSIDE_ROLES.get(kind, roles)
        faults.append(_Fault(t, kind, rng.randrange(1 << 30), seconds, roles, inside))
        t += rng.uniform(*prof.fault_gap)
    if faults and not any(f.kind == "stop" for f in faults):  # at least one zombie writer
        first = faults[0]
        seconds = rng.uniform(prof.lease * 1.3, prof.lease * 2.5)
        faults[0] = _Fault(first.at, "stop", first.pick, seconds, ("writer",))
    if can_restart:
        faults.append(_Fault(prof.duration * 0.6, "restart", 0, 0.0))
        faults.sort(key=lambda f: f.at)
    return faults


async def _apply_faults(
    harness: _Harness,
    schedule: list[_Fault],
    start: float,
    deadline: float,
    rng: random.Random,
    run: ProcessRun,
) -> None:
    for fault in schedule:
        wait = start + fault.at - time.time()
        if wait > 0:
            await asyncio.sleep(wait)
        if time.time() >= deadline:
            break
        try:
            at = time.time()
            victim = await harness.inject(fault)
            if victim is not None:
                run.faults[fault.kind] += 1
                run.fault_log.append(
                    Op(
                        f"fault#{len(run.fault_log) + 1}",
                        FAULTS,
                        fault.kind,
                        None,
                        {"victim": victim, "seconds": round(fault.seconds, 2) or None},
                        at,
                        time.time(),
                        "ok",
                    )
                )
        except Exception as e:  # a fault that could not be applied is noted, not fatal
            run.notes.append(f"fault {fault.kind} at {fault.at:.2f}s not applied: {e!r}")
    rest = deadline - time.time()
    if rest > 0:
        await asyncio.sleep(rest)


class _Harness:
    """Runs role players (processes or tasks) and applies faults to them."""

    startup = 0.0
    started = 0

    async def spawn(self, spec: Spec) -> None:
        raise NotImplementedError

    async def go(self, duration: float, run: ProcessRun) -> float:
        """Wait until every player is ready; start the clock; return the deadline."""
        return time.time() + duration

    async def inject(self, fault: _Fault, victim: _Player | None = None) -> str | None:
        """Apply ``fault``; return what it hit (a process, the proxy, the server),
        or ``None`` if it could not be applied."""
        raise NotImplementedError

    async def finish(self, hard_stop: float, run: ProcessRun) -> None:
        raise NotImplementedError

    async def cleanup(self) -> None:
        """Whatever happened: no player left running, no proxy left listening."""


@dataclass
class _Player:
    spec: Spec
    incarnation: int = 0
    handle: Any = None
    gate: Gate | None = None
    stderr: str = ""


_KILL_ROLES = ("writer", "worker", "prompter", "atomic", "follower")


async def _when(ready: Callable[[], bool], within: float = INSIDE_WAIT) -> bool:
    """Poll ``ready`` every millisecond or so until it holds (True) or ``within``
    seconds pass (False)."""
    give_up = time.monotonic() + within
    while not ready():
        if time.monotonic() > give_up:
            return False
        await asyncio.sleep(0.001)
    return True


def _last_record(path: str) -> dict[str, Any] | None:
    """The last complete record of a process's JSON-lines file."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        return record if isinstance(record, dict) else None
    return None


def _victims(players: list[_Player], fault: _Fault, kinds: tuple[str, ...]) -> _Player | None:
    pool = [p for p in players if p.spec.role in kinds] or players
    return pool[fault.pick % len(pool)] if pool else None


class _ProcessHarness(_Harness):
    startup = 60.0

    def __init__(
        self,
        url: str,
        tmp: str,
        record_files: list[str],
        proxy: TcpProxy | None,
        target: Target,
    ) -> None:
        self.url = url
        self.tmp = tmp
        self.record_files = record_files
        self.proxy = proxy
        self.target = target
        self.players: list[_Player] = []
        self.env = dict(os.environ)
        path = [p or os.getcwd() for p in sys.path]
        self.env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(path))
        self.go_file = os.path.join(tmp, "go")

    def _launch(self, player: _Player) -> None:
        spec = player.spec
        base = spec.name.split(".", 1)[0]
        spec.name = f"{base}.{player.incarnation}" if player.incarnation else base
        spec.seed = spec.seed * 31 + player.incarnation
        spec.url = self.url
        spec.records = os.path.join(self.tmp, f"{spec.name}.jsonl")
        self.record_files.append(spec.records)
        spec_path = os.path.join(self.tmp, f"{spec.name}.json")
        with open(spec_path, "w", encoding="utf-8") as f:
            json.dump(asdict(spec), f)
        err_path = os.path.join(self.tmp, f"{spec.name}.err")
        with open(err_path, "wb") as err:
            player.handle = subprocess.Popen(
                [sys.executable, "-m", "fxworld_conformance._child", spec_path],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=self.env,
                start_new_session=True,
            )
        player.stderr = err_path
        self.started += 1

    async def spawn(self, spec: Spec) -> None:
        spec.extra["go"] = self.go_file
        spec.extra["parent"] = os.getpid()
        player = _Player(spec)
        self.players.append(player)
        self._launch(player)

    async def go(self, duration: float, run: ProcessRun) -> float:
        began = time.time()
        give_up = began + 90.0
        while time.time() < give_up:
            if _all_ready(self.players) or any(p.handle.poll() is not None for p in self.players):
                break
            await asyncio.sleep(0.05)
        run.notes.append(f"processes ready in {time.time() - began:.1f}s")
        deadline = time.time() + duration
        _write_atomically(self.go_file, repr(deadline))
        return deadline

    async def inject(self, fault: _Fault, victim: _Player | None = None) -> str | None:
        if fault.kind in INSIDE_ROLES:
            victim = _victims(self.players, fault, fault.roles)
            if victim is None or victim.handle.poll() is not None:
                return None
            records = victim.spec.records
            assert records is not None
            if not await _when(lambda: inside_call(_last_record(records), fault.kind)):
                return None
            await asyncio.sleep(fault.inside)
            return await self.inject(replace(fault, kind=fault.kind.split("_")[0]), victim)
        if fault.kind == "kill":
            victim = victim or _victims(self.players, fault, fault.roles or _KILL_ROLES)
            if victim is None:
                return None
            name = victim.spec.name
            proc: subprocess.Popen[bytes] = victim.handle
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            await asyncio.to_thread(proc.wait)
            victim.incarnation += 1
            self._launch(victim)
            return f"{name} (replaced by {victim.spec.name})"
        if fault.kind == "stop":
            victim = victim or _victims(self.players, fault, fault.roles or ("writer", "worker"))
            if victim is None or victim.handle.poll() is not None:
                return None
            pid = victim.handle.pid
            os.kill(pid, signal.SIGSTOP)
            asyncio.get_running_loop().call_later(fault.seconds, _cont, victim.handle)
            return victim.spec.name
        if fault.kind == "cut" and self.proxy is not None:
            cut = self.proxy.cut(refuse_for=fault.seconds)
            return f"{cut} connections"
        if fault.kind == "stall" and self.proxy is not None:
            self.proxy.stall(fault.seconds)
            return "every connection"
        if fault.kind == "restart" and self.target.restart is not None:
            await self.target.restart()
            return "the server"
        return None

    async def finish(self, hard_stop: float, run: ProcessRun) -> None:
        for p in self.players:
            _cont(p.handle)
        await asyncio.to_thread(_wait_all, [p.handle for p in self.players], hard_stop)
        for p in self.players:
            if p.handle.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.handle.pid, signal.SIGKILL)
                await asyncio.to_thread(p.handle.wait)
            elif p.handle.returncode not in (0, -signal.SIGKILL):
                run.crashed.append(f"{p.spec.name} (exit {p.handle.returncode}): {_tail(p.stderr)}")
        if self.proxy is not None:
            await self.proxy.close()

    async def cleanup(self) -> None:
        for p in self.players:
            if p.handle is not None and p.handle.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.handle.pid, signal.SIGKILL)
                await asyncio.to_thread(p.handle.wait)
        if self.proxy is not None:
            await self.proxy.close()


def _all_ready(players: list[_Player]) -> bool:
    return all(os.path.exists(f"{p.spec.records}.ready") for p in players)


def _write_atomically(path: str, text: str) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def _wait_all(procs: list[subprocess.Popen[bytes]], until: float) -> None:
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.01, until - time.time()))


def _cont(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)


def _tail(path: str, size: int = 800) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", "replace").strip() or "(no stderr)"
    except OSError:
        return "(no stderr)"


class _TaskHarness(_Harness):
    startup = 0.05

    def __init__(self, world: World, sink: ListSink, target: Target) -> None:
        self.world = world
        self.sink = sink
        self.target = target
        self.players: list[_Player] = []

    def _launch(self, player: _Player) -> None:
        spec = player.spec
        base = spec.name.split(".", 1)[0]
        spec.name = f"{base}.{player.incarnation}" if player.incarnation else base
        spec.seed = spec.seed * 31 + player.incarnation
        player.gate = Gate()
        rec = Recorder(spec.name, self.sink)
        player.handle = asyncio.create_task(run_role(self.world, spec, rec, player.gate))
        self.started += 1

    async def spawn(self, spec: Spec) -> None:
        player = _Player(spec)
        self.players.append(player)
        self._launch(player)

    async def inject(self, fault: _Fault, victim: _Player | None = None) -> str | None:
        if fault.kind in INSIDE_ROLES:
            victim = _victims(self.players, fault, fault.roles)
            if victim is None:
                return None
            name = victim.spec.name
            if not await _when(lambda: inside_call(self._last_record(name), fault.kind)):
                return None
            await asyncio.sleep(fault.inside)
            return await self.inject(replace(fault, kind=fault.kind.split("_")[0]), victim)
        if fault.kind == "kill":
            victim = victim or _victims(self.players, fault, fault.roles or _KILL_ROLES)
            if victim is None:
                return None
            name = victim.spec.name
            task: asyncio.Task[None] = victim.handle
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            victim.incarnation += 1
            self._launch(victim)
            return f"{name} (replaced by {victim.spec.name})"
        if fault.kind == "stop":
            victim = victim or _victims(self.players, fault, fault.roles or ("writer", "worker"))
            if victim is None or victim.gate is None:
                return None
            victim.gate.freeze()
            asyncio.get_running_loop().call_later(fault.seconds, victim.gate.thaw)
            return victim.spec.name
        if fault.kind == "restart" and self.target.restart is not None:
            await self.target.restart()
            return "the server"
        return None

    def _last_record(self, process: str) -> dict[str, Any] | None:
        for record in reversed(self.sink.records[-200:]):
            if record.get("p") == process or str(record.get("id")).startswith(process + "#"):
                found: dict[str, Any] = record
                return found
        return None

    async def finish(self, hard_stop: float, run: ProcessRun) -> None:
        for p in self.players:
            if p.gate is not None:
                p.gate.thaw()
        tasks = [p.handle for p in self.players]
        _, pending = await asyncio.wait(tasks, timeout=max(0.0, hard_stop - time.time()))
        for task in pending:
            task.cancel()
        for p in self.players:
            task = p.handle
            with contextlib.suppress(BaseException):
                await task
            if not task.cancelled() and task.exception() is not None:
                run.crashed.append(f"{p.spec.name}: {task.exception()!r}")

    async def cleanup(self) -> None:
        for p in self.players:
            if p.handle is not None and not p.handle.done():
                p.handle.cancel()
                with contextlib.suppress(BaseException):
                    await p.handle


# -- after the workload ---------------------------------------------------------------


class Unopenable(Exception):
    """The world could not be opened and set up: nothing can be judged."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


async def _reopen(
    target: Target, namespace: str, op_timeout: float, *, retry_for: float = 30.0
) -> World:
    """Open and set up the world directly (not through the proxy), retrying for
    ``retry_for`` seconds while the server comes back. A configuration error is the
    caller's and propagates; any other failure is :class:`Unopenable`."""
    give_up = time.time() + retry_for
    while True:
        try:
            return await asyncio.wait_for(target.open(namespace), max(op_timeout * 2, 30.0))
        except ConfigurationError:
            raise
        except Exception as e:
            if time.time() < give_up:
                await asyncio.sleep(0.3)
                continue
            name = f"{type(e).__module__}.{type(e).__qualname__}: {e}"
            g = "W16" if not isinstance(e, WorldError) else "W9"
            why = f"the world could not be opened and set up: {name}"
            raise Unopenable(Finding(g, why)) from e


async def _call(
    rec: Recorder,
    op: str,
    session: str | None,
    args: dict[str, Any],
    call: Callable[[], Awaitable[Any]],
    prof: Profile,
    encode: Callable[[Any], Any] = lambda v: v,
    op_id: str | None = None,
) -> Done:
    return await rec.run(
        op, session, args, call, within=prof.op_timeout * 2, encode=encode, op_id=op_id
    )


async def _wake(world: World, rec: Recorder, prof: Profile, sid: str, delay: float) -> Done:
    return await _call(
        rec, "wake", sid, {"delay": delay}, partial(world.wake, sid, delay=delay), prof
    )


async def _take_wake(world: World, rec: Recorder, prof: Profile, lease: float) -> Done:
    return await _call(
        rec,
        "take_wake",
        None,
        {"lease": lease},
        partial(world.take_wake, lease=lease),
        prof,
        lease_dict,
    )


async def _finish_wake(world: World, rec: Recorder, prof: Profile, held: WakeLease) -> Done:
    return await _call(
        rec,
        "finish_wake",
        held.session_id,
        {"token": held.token},
        partial(world.finish_wake, held),
        prof,
    )


async def _acquire(
    world: World, rec: Recorder, prof: Profile, sid: str, lease: WakeLease | None = None
) -> Done:
    """``acquire`` of ``sid``, recorded with the token of the lease it acts under."""
    args: dict[str, Any] = {} if lease is None else {"lease": lease.token}
    return await _call(rec, "acquire", sid, args, partial(world.acquire, sid), prof, fence_dict)


async def _drain(world: World, rec: Recorder, prof: Profile) -> bool:
    """Take and finish every due wake; True when none is left."""
    give_up = time.time() + 20.0
    while time.time() < give_up:
        got = await _take_wake(world, rec, prof, 10.0)
        if got.outcome != "ok":
            await asyncio.sleep(0.2)
            continue
        if got.value is None:
            return True
        held: WakeLease = got.value
        await _finish_wake(world, rec, prof, held)
    return False


async def _take(
    world: World, rec: Recorder, prof: Profile, lease: float, want: str
) -> WakeLease | None:
    """Take wakes until ``want``'s; finish any other taken on the way."""
    for _ in range(20):
        got = await _take_wake(world, rec, prof, lease)
        if got.outcome != "ok" or got.value is None:
            return None
        held: WakeLease = got.value
        if held.session_id == want:
            return held
        await _finish_wake(world, rec, prof, held)
    return None


async def _append(
    world: World,
    rec: Recorder,
    prof: Profile,
    sid: str,
    *,
    fence: Fence | None = None,
    lease: str | None = None,
    n: int = 1,
    key: str | None = None,
    wake: float | None = None,
    repeat_of: str | None = None,
    tag: str | None = None,
    expect: int | None = None,
) -> Done:
    tag = repeat_of or tag or rec.next_id()
    entries = batch_entries("probe", tag, n, rec.process)
    args: dict[str, Any] = {"tag": tag, "n": n}
    if fence is not None:
        args["fence"] = fence.epoch
    if lease is not None:
        args["lease"] = lease
    if key is not None:
        args["key"] = key
    if wake is not None:
        args["wake"] = wake
    if repeat_of is not None:
        args["retry_of"] = repeat_of
    if expect is not None:
        args["expect"] = expect
    return await _call(
        rec,
        "append",
        sid,
        args,
        partial(world.append, sid, entries, fence=fence, key=key, wake=wake, expect=expect),
        prof,
        op_id=None if repeat_of else tag,
    )


async def _retry_interrupted(world: World, rec: Recorder, prof: Profile, ops: list[Op]) -> set[str]:
    """Retry, with its key and its entries, every keyed prompt whose outcome is
    unknown and was not retried to an answer (its process was killed inside it):
    a world that lost the key with the process writes the batch twice (W6). The
    retry asks for no wake, so that it cannot stand in for one the call owed (W7).
    Returns the batch ids of interrupted appends that were in the log before."""
    answered = {op.tag for op in ops if op.op == "append" and op.outcome != "indeterminate"}
    interrupted = {op.session for op in ops if op.op == "append" and op.outcome != "ok"}
    landed: set[str] = set()
    for sid in sorted(s for s in interrupted if s is not None):
        log = await _read_all(world, sid, rec, prof)
        if not isinstance(log, Finding):
            landed.update(t for t in (hist.entry_tag(e) for e in log) if t is not None)
    for op in ops:
        key, n = op.args.get("key"), int(op.args.get("n", 1))
        role = op.process.split("-", 1)[0]
        if op.op != "append" or op.outcome != "indeterminate" or not isinstance(key, str):
            continue
        if op.tag is None or op.tag in answered or role not in ("prompter", "atomic"):
            continue
        answered.add(op.tag)
        assert op.session is not None
        entries = batch_entries("prompt", op.tag, n, op.process)
        args = {"tag": op.tag, "n": n, "key": key, "retry_of": op.tag}
        call = partial(world.append, op.session, entries, key=key)
        await _call(rec, "append", op.session, args, call, prof)
    return landed


async def _probes(world: World, rec: Recorder, prof: Profile) -> None:
    """Deterministic scenarios the random workload may or may not hit."""
    # A wake asked for while a lease is held survives that lease's finish (W13).
    sid = "kit-probe-finish"
    await _wake(world, rec, prof, sid, 0.0)
    held = await _take(world, rec, prof, 5.0, sid)
    await _wake(world, rec, prof, sid, 0.0)
    if held is not None:
        await _finish_wake(world, rec, prof, held)
    # A delayed wake is not delivered before its time (W11).
    sid = "kit-probe-early"
    await _wake(world, rec, prof, sid, 0.8)
    early = await _take(world, rec, prof, 5.0, sid)
    if early is not None:
        await _finish_wake(world, rec, prof, early)
    # A second take while the lease lasts, at once and a moment later, does not get
    # the same session (W12).
    sid = "kit-probe-twice"
    await _wake(world, rec, prof, sid, 0.0)
    first = await _take(world, rec, prof, 5.0, sid)
    second = await _take(world, rec, prof, 5.0, sid)
    if second is None:
        await asyncio.sleep(0.3)
        second = await _take(world, rec, prof, 5.0, sid)
    for held_twice in (first, second):
        if held_twice is not None:
            await _finish_wake(world, rec, prof, held_twice)
    # A lease left to expire is delivered again; the new worker's takeover refuses
    # the old worker's fence; the old lease can no longer be renewed (W12, W2).
    sid = "kit-probe-lease"
    short = 0.4
    await _wake(world, rec, prof, sid, 0.0)
    old = await _take(world, rec, prof, short, sid)
    if old is not None:
        got = await _acquire(world, rec, prof, sid, old)
        if got.outcome == "ok":
            old_fence: Fence = got.value
            await _append(world, rec, prof, sid, fence=old_fence, lease=old.token)
            await asyncio.sleep(short + 0.4)
            new = await _take(world, rec, prof, 5.0, sid)
            if new is not None:
                took = await _acquire(world, rec, prof, sid, new)
                await _append(world, rec, prof, sid, fence=old_fence, lease=old.token)
                await _call(
                    rec,
                    "renew_wake",
                    sid,
                    {"token": old.token, "lease": 5.0},
                    partial(world.renew_wake, old, lease=5.0),
                    prof,
                    lambda w: {"expires": w.expires_at.timestamp()},
                )
                if took.outcome == "ok":
                    await _append(world, rec, prof, sid, fence=took.value, lease=new.token)
                await _finish_wake(world, rec, prof, new)
    # A replaced writer is refused, and stays refused (W2, W8).
    sid = "kit-probe-stale"
    a = await _acquire(world, rec, prof, sid)
    b = await _acquire(world, rec, prof, sid)
    if a.outcome == "ok" and b.outcome == "ok":
        for _ in range(2):
            await _append(world, rec, prof, sid, fence=a.value, n=2)
        await _append(world, rec, prof, sid, fence=b.value, n=2)
    # A client retrying a prompt with its key never doubles it (W6).
    sid = "kit-probe-key"
    key_tag = rec.next_id()
    await _append(world, rec, prof, sid, n=2, key="kit-probe", tag=key_tag)
    await _append(world, rec, prof, sid, n=2, key="kit-probe", repeat_of=key_tag)
    # A session never written reads as empty, with no error (W9, W16).
    sid = "kit-probe-empty"
    await _call(
        rec,
        "read",
        sid,
        {"after": 0, "limit": 10},
        partial(world.read, sid, 0, limit=10),
        prof,
        entry_dicts,
    )
    # Concurrent batches land whole, never interleaved (W4).
    sid = "kit-probe-batches"
    await asyncio.gather(*(_append(world, rec, prof, sid, n=3) for _ in range(4)))
    # ... and expect= refuses a stale last seq, then accepts the true one (W5).
    await _append(world, rec, prof, sid, n=1, expect=5)
    await _append(world, rec, prof, sid, n=1, expect=12)
    # An append's wake is delivered though nothing else asks for the session (W7).
    await _append(world, rec, prof, "kit-probe-append-wake", n=1, wake=0.0)


async def _read_all(
    world: World, sid: str, rec: Recorder, prof: Profile
) -> list[EntryDict] | Finding:
    """The whole log of ``sid``, paged and recorded, retried a few times; a
    violation if the world cannot be read once every process has stopped."""
    failures: list[Op] = []
    for _ in range(4):
        out: list[EntryDict] = []
        while True:
            after = len(out)
            done = await _call(
                rec,
                "read",
                sid,
                {"after": after, "limit": 1000},
                partial(world.read, sid, after, limit=1000),
                prof,
                entry_dicts,
            )
            if done.outcome != "ok":
                break
            out.extend(entry_dicts(done.value))
            if len(done.value) < 1000:
                return out
        failures.append(_last_op(rec, sid, done))
        await asyncio.sleep(0.5)
    g = "W9" if all(op.typed for op in failures) else "W16"
    return Finding(g, f"after the run, reading session {sid} keeps failing", failures)


def _last_op(rec: Recorder, sid: str, done: Done) -> Op:
    """A stand-in operation describing a failed final read."""
    error = done.error
    typed = error is None or isinstance(error, WorldError)
    name = type(error).__name__ if error is not None else None
    if error is not None and not typed:
        name = f"{type(error).__module__}.{type(error).__qualname__}: {error}"
    now = time.time()
    return Op(
        id=rec.next_id(),
        process=rec.process,
        op="read",
        session=sid,
        args={"after": 0},
        start=now,
        end=now,
        outcome=done.outcome,
        error=name,
        typed=typed,
    )


# -- restart --------------------------------------------------------------------------


async def _restart_check(target: Target, prof: Profile, seed: int) -> CheckResult:
    """Write, crash-restart the server, and check that every acknowledged append,
    fence and pending wake survived (each through the standard checkers)."""
    name = RESTART_ROW
    guarantees = ("W1", "W2", "W4", "W7", "W12")
    assert target.restart is not None
    started = time.time()
    namespace = target.fresh_namespace()
    sink = ListSink()
    rec = Recorder("restart", sink)
    sessions = ["kit-restart-a", "kit-restart-b", "kit-restart-w1", "kit-restart-w2"]
    try:
        world = await _reopen(target, namespace, prof.op_timeout, retry_for=0.0)
    except Unopenable as e:
        return _unjudgeable_row([e.finding], seed, time.time() - started)
    try:
        keyed: list[str] = []
        for k in range(4):
            keyed.append(rec.next_id())
            await _append(
                world, rec, prof, "kit-restart-b", n=1 + k % 3, key=f"rk{k}", tag=keyed[-1]
            )
        got = await _acquire(world, rec, prof, "kit-restart-a")
        fence: Fence | None = got.value if got.outcome == "ok" else None
        if fence is not None:
            await _append(world, rec, prof, "kit-restart-a", fence=fence, n=3)
        await _append(world, rec, prof, "kit-restart-w1", n=1, wake=0.0)
        await _wake(world, rec, prof, "kit-restart-w2", 1.0)
        with contextlib.suppress(Exception):
            await world.close()
        try:
            await target.restart()
        except Exception as e:  # the fixture's restart failed: the kit's trouble
            return kit_error(name, e, time.time() - started)
        world = await _reopen(target, namespace, prof.op_timeout)
        for k in range(4):  # keyed repeats after the restart write nothing (W6)
            await _append(
                world, rec, prof, "kit-restart-b", n=1 + k % 3, key=f"rk{k}", repeat_of=keyed[k]
            )
        await _acquire(world, rec, prof, "kit-restart-a")
        if fence is not None:
            await _append(world, rec, prof, "kit-restart-a", fence=fence, n=1)
        await asyncio.sleep(1.1)
        drained = await _drain(world, rec, prof)
        final: dict[str, list[EntryDict]] = {}
        unreadable: list[Finding] = []
        for sid in sessions:
            log = await _read_all(world, sid, rec, prof)
            if isinstance(log, Finding):
                unreadable.append(log)
            else:
                final[sid] = log
    except Exception as e:
        return CheckResult(
            name,
            guarantees,
            "failed",
            f"the world did not come back from a restart: {e!r}",
            operations=len(sink.records) // 2,
            seconds=time.time() - started,
        )
    finally:
        with contextlib.suppress(Exception):
            await world.close()
    ops = load_records(sink.records)
    h = History(ops, final, started, drained)
    found = [(h, v) for v in unreadable] or [(h, v) for check in CHECKS for v in check.run(h)]
    takes = {op.session for op in ops if op.op == "take_wake" and op.result}
    for sid in ("kit-restart-w1", "kit-restart-w2"):
        if sid not in takes:
            found.append(
                (
                    h,
                    Finding(
                        "W7",
                        f"the pending wake of {sid} did not survive the restart",
                        [o for o in ops if o.session == sid],
                    ),
                )
            )
    extra = {"seed": seed, "mode": "restart"}
    return _row(
        name.removeprefix(ROW), guarantees, found, len(ops), time.time() - started, extra, seed
    )


# -- running ---------------------------------------------------------------------------


def _run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code, even inside a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as e:
            box["error"] = e

    thread = threading.Thread(target=target, name="fxworld-conformance-procs")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]
