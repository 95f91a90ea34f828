"""Tier 2: real OS processes race on shared sessions under crashes and cut connections.

:func:`run_process_checks` runs a seeded workload (see
:mod:`fxworld_conformance.procs.child` for the roles: writers taking sessions over and
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
    a while, through :class:`~fxworld_conformance.procs.proxy.TcpProxy`, for worlds
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
agree within :data:`~fxworld_conformance.checkers.history.CLOCK_TOLERANCE`.

The harness (players, faults, :class:`ProcessRun`) is in
:mod:`~fxworld_conformance.procs.harness`, the kit's own calls after the workload
(drain, retries, probes, final read) in :mod:`~fxworld_conformance.procs.probes`;
this module runs the workload and the restart check and makes the report rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import shutil
import tempfile
import time
from collections import Counter
from typing import Any

from fxworld import World
from fxworld.types import Fence
from fxworld_conformance.checkers import CHECKS, check_errors_typed
from fxworld_conformance.checkers.history import (
    EntryDict,
    Finding,
    History,
    ListSink,
    Recorder,
    load_records,
    read_record_file,
)
from fxworld_conformance.cleanup import run_sync
from fxworld_conformance.procs.child import Spec
from fxworld_conformance.procs.harness import (
    FAULTS,
    ProcessRun,
    _apply_faults,
    _Harness,
    _ProcessHarness,
    _schedule,
    _TaskHarness,
)
from fxworld_conformance.procs.probes import (
    _PROBE_SESSIONS,
    Unopenable,
    _acquire,
    _append,
    _drain,
    _probes,
    _read_all,
    _reopen,
    _retry_interrupted,
    _wake,
)
from fxworld_conformance.procs.proxy import TcpProxy, proxied_url, upstream_of
from fxworld_conformance.profiles import PROFILES as KIT_PROFILES
from fxworld_conformance.profiles import ProcessProfile as Profile
from fxworld_conformance.profiles import profile as kit_profile
from fxworld_conformance.report import CheckResult, kit_error
from fxworld_conformance.target import Target, with_namespace

__all__ = ["run_process_checks", "PROFILES", "Profile", "ProcessRun", "run_workload"]

PROFILES: dict[str, Profile] = {name: p.processes for name, p in KIT_PROFILES.items()}
"""Profile name -> how hard the process tier pushes (from
:data:`fxworld_conformance.profiles.PROFILES`)."""


ROW = "processes: "
"""Prefix of every row name of this tier."""


RESTART_ROW = ROW + "acknowledged appends and pending wakes survive a restart"


def run_process_checks(target: Target, *, profile: str, seed: int) -> list[CheckResult]:
    """Run the process tier against ``target``; one :class:`CheckResult` per check.

    Synchronous: runs its own event loop (in a helper thread if the caller's thread
    already runs one). ``profile`` is ``ci``, ``thorough`` or ``quick``; ``seed``
    makes the workload and the fault schedule repeatable.
    """
    return run_sync(_process_checks(target, kit_profile(profile).processes, seed))


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
    shown = [v.render(h.t0, h) + _faults_near(h, v) for h, v in found[:3]]
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


async def run_workload(
    target: Target, prof: Profile, seed: int, caps: frozenset[str] | None = None
) -> ProcessRun:
    """Run one seeded workload with faults; return its history, drained and read."""
    namespace = target.fresh_namespace()
    opened = [await _reopen(target, namespace, prof.op_timeout, retry_for=0.0)]
    try:
        return await _workload(target, prof, seed, caps, namespace, opened)
    finally:
        await target.close(opened[-1])


async def _workload(
    target: Target,
    prof: Profile,
    seed: int,
    caps: frozenset[str] | None,
    namespace: str,
    opened: list[World],
) -> ProcessRun:
    """:func:`run_workload` on the world ``opened[-1]``; a world it opens again
    goes at the end of ``opened``."""
    rng = random.Random(seed)
    world = opened[-1]
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
        if target.keep:
            target.kept.append(f"{tmp} (the process tier's records)")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    ops = load_records(records)
    if use_processes:  # a fresh, direct connection (the server may have restarted)
        with contextlib.suppress(Exception):
            await world.close()
        world = await _reopen(target, namespace, prof.op_timeout)
        opened.append(world)
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
    ops.extend(load_records(kit_sink.records))
    ops.extend(run.fault_log)
    ops.sort(key=lambda o: (o.start, o.id))
    run.history = History(ops, final, t0, drained, landed_first)
    run.seconds = time.time() - t0
    return run


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
        await target.close(world)
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
