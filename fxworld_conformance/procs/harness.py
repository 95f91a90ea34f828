"""The process tier's harness: it runs the role players (child processes, or tasks
in this process), schedules and injects the faults (``kill``, ``stop``,
``kill_inside``, ``stop_inside``, ``cut``, ``stall``, ``restart``) and collects
what the workload produced (:class:`ProcessRun`). See :mod:`fxworld_conformance.procs`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from fxworld import registered_schemes
from fxworld.protocol import World
from fxworld_conformance.checkers.history import Finding, History, ListSink, Op, Recorder
from fxworld_conformance.procs.child import Gate, Spec, run_role
from fxworld_conformance.procs.proxy import TcpProxy
from fxworld_conformance.profiles import ProcessProfile as Profile
from fxworld_conformance.target import Target

__all__ = ["ProcessRun", "FAULTS", "INSIDE_ROLES", "INSIDE_WAIT", "inside_call"]


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


FAULTS = "kit (faults)"
"""The process name under which applied faults are recorded in a history."""


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
        self, url: str, tmp: str, record_files: list[str], proxy: TcpProxy | None, target: Target
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
                [sys.executable, "-m", "fxworld_conformance.procs.child", spec_path],
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
        spec.extra["schemes"] = registered_schemes()  # the child opens what we can
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
