"""The workload of the process tier: one role per OS process (or per task).

Run as ``python -m fxworld_conformance.procs.child SPEC.json``: the child opens the world
by URL, plays its role until the spec's deadline and records every operation to
its own JSON-lines file (see :mod:`fxworld_conformance.checkers.history`). The same role
coroutines run as asyncio tasks in one process when the world cannot be shared.

Roles:

``writer``
    takes a session over (``acquire``) and appends fenced batches of 1-5 entries,
    some with ``expect``; once refused with ``Fenced`` it tries once more with the
    same stale fence (that must be refused too), then takes over again.
``prompter``
    appends unfenced prompts with an idempotency key and often ``wake=``; a call
    whose outcome is unknown is retried with the same key.
``atomic``
    appends keyed batches of 2-3 entries with ``wake=`` to a fresh session of its
    own per call, which nobody else writes or wakes: the harness kills and
    freezes it inside these calls (``kill_inside``), and what landed of a call
    then shows whether its batch, key and wake were one atomic write.
``follower``
    follows sessions for a while, then reconnects from the last seq it saw.
``reader``
    reads pages (``after``, ``limit``) near the end of the log, sometimes all of it.
``worker``
    takes wakes under a short lease, takes the session over, appends fenced steps,
    renews, sometimes stalls past its lease, and finishes.
``poker``
    asks for wakes, some delayed.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from fxworld import open_world, register_scheme
from fxworld.errors import Conflict, Fenced
from fxworld.protocol import World
from fxworld.types import Fence, WakeLease
from fxworld_conformance.checkers.history import (
    Done,
    FileSink,
    Outcome,
    Recorder,
    batch_entries,
    entry_dict,
    entry_dicts,
    fence_dict,
    lease_dict,
)

__all__ = ["ROLES", "Spec", "Gate", "run_role", "main"]


@dataclass
class Spec:
    """What one process (or task) of the workload does."""

    role: str
    name: str
    sessions: list[str]
    seed: int
    deadline: float
    """Wall-clock time at which the role stops starting operations."""
    lease: float = 1.0
    op_timeout: float = 4.0
    pace: float = 0.03
    """Mean pause between two operations, in seconds."""
    url: str | None = None
    records: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Gate:
    """Lets the harness freeze a task between two operations (tasks mode's
    stand-in for ``SIGSTOP``)."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()

    def freeze(self) -> None:
        self._open.clear()

    def thaw(self) -> None:
        self._open.set()

    async def wait(self) -> None:
        await self._open.wait()


Role = Callable[["_Ctx"], Awaitable[None]]


@dataclass
class _Ctx:
    world: World
    spec: Spec
    rec: Recorder
    rng: random.Random
    gate: Gate | None

    def alive(self) -> bool:
        parent = self.spec.extra.get("parent")
        if parent is not None and os.getppid() != parent:
            return False  # the harness is gone: stop rather than run on alone
        return time.time() < self.spec.deadline

    async def pause(self, scale: float = 1.0) -> None:
        await asyncio.sleep(self.rng.uniform(0, 2 * self.spec.pace * scale))
        if self.gate is not None:
            await self.gate.wait()

    async def call(
        self,
        op: str,
        session: str | None,
        args: dict[str, Any],
        call: Callable[[], Awaitable[Any]],
        encode: Callable[[Any], Any] = lambda value: value,
        op_id: str | None = None,
    ) -> Done:
        return await self.rec.run(
            op, session, args, call, within=self.spec.op_timeout, encode=encode, op_id=op_id
        )


async def _fenced_append(
    ctx: _Ctx,
    sid: str,
    fence: Fence,
    kind: str,
    n: int,
    *,
    expect: int | None = None,
    lease: str | None = None,
) -> Done:
    tag = ctx.rec.next_id()
    entries = batch_entries(kind, tag, n, ctx.spec.name)
    args: dict[str, Any] = {"tag": tag, "n": n, "fence": fence.epoch}
    if expect is not None:
        args["expect"] = expect
    if lease is not None:
        args["lease"] = lease
    return await ctx.call(
        "append",
        sid,
        args,
        partial(ctx.world.append, sid, entries, fence=fence, expect=expect),
        op_id=tag,
    )


async def writer(ctx: _Ctx) -> None:
    while ctx.alive():
        sid = ctx.rng.choice(ctx.spec.sessions)
        await ctx.pause()
        got = await ctx.call("acquire", sid, {}, partial(ctx.world.acquire, sid), fence_dict)
        if got.outcome != "ok":
            continue
        fence: Fence = got.value
        last: int | None = fence.seq
        for _ in range(ctx.rng.randint(1, 6)):
            if not ctx.alive():
                return
            await ctx.pause()
            if ctx.rng.random() < 0.1:  # a slow writer, likely replaced meanwhile
                await asyncio.sleep(ctx.rng.uniform(0.1, 0.5))
            expect = last if last is not None and ctx.rng.random() < 0.3 else None
            n = ctx.rng.choice([1, 1, 2, 3, 5])
            done = await _fenced_append(ctx, sid, fence, "out", n, expect=expect)
            if done.outcome == "ok":
                last = done.value
            elif isinstance(done.error, Conflict):
                last = done.error.last
            elif isinstance(done.error, Fenced):
                # Replaced: a stale writer must stay refused on every later attempt.
                await _fenced_append(ctx, sid, fence, "out", 1)
                break
            else:
                last = None


async def prompter(ctx: _Ctx) -> None:
    while ctx.alive():
        await ctx.pause(2.0)
        sid = ctx.rng.choice(ctx.spec.sessions)
        n = ctx.rng.choice([1, 1, 2])
        wake = ctx.rng.choice([0.0, 0.0, None, 0.3])
        tag = ctx.rec.next_id()
        key = f"k-{tag}"
        entries = batch_entries("prompt", tag, n, ctx.spec.name)
        for attempt in range(3):
            args: dict[str, Any] = {"tag": tag, "n": n, "key": key, "wake": wake}
            if attempt:
                args["retry_of"] = tag
            done = await ctx.call(
                "append",
                sid,
                args,
                partial(ctx.world.append, sid, entries, key=key, wake=wake),
                op_id=None if attempt else tag,
            )
            if done.outcome != "indeterminate" or not ctx.alive():
                break
            await asyncio.sleep(0.1)


def atomic_session(process: str, k: int) -> str:
    """The session of the ``k``-th call of the ``atomic`` process ``process``."""
    return f"kit-a-{process}-{k}"


async def atomic(ctx: _Ctx) -> None:
    k = 0
    while ctx.alive():
        await ctx.pause(2.0)
        k += 1
        sid = atomic_session(ctx.spec.name, k)
        n = ctx.rng.choice([2, 3])
        wake = ctx.rng.choice([0.0, 0.2])
        tag = ctx.rec.next_id()
        key = f"k-{tag}"
        entries = batch_entries("prompt", tag, n, ctx.spec.name)
        args: dict[str, Any] = {"tag": tag, "n": n, "key": key, "wake": wake}
        await ctx.call(
            "append",
            sid,
            args,
            partial(ctx.world.append, sid, entries, key=key, wake=wake),
            op_id=tag,
        )


async def follower(ctx: _Ctx) -> None:
    cursors = dict.fromkeys(ctx.spec.sessions, 0)
    while ctx.alive():
        await ctx.pause()
        sid = ctx.rng.choice(ctx.spec.sessions)
        after = cursors[sid]
        cap = ctx.rng.choice([5, 50, 200])
        seen: list[dict[str, Any]] = []
        error: BaseException | None = None
        start = time.time()
        stream = ctx.world.follow(sid, after)
        try:
            async with asyncio.timeout(ctx.rng.uniform(0.3, 1.2)):
                async for entry in stream:
                    seen.append(entry_dict(entry))
                    if len(seen) >= cap:
                        break
        except TimeoutError:
            pass
        except Exception as e:
            error = e
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                try:
                    async with asyncio.timeout(ctx.spec.op_timeout):
                        await aclose()
                except Exception:
                    pass
        outcome: Outcome = "ok" if error is None else "indeterminate"
        ctx.rec.record("follow", sid, {"after": after}, start, outcome, seen, error)
        if seen:
            cursors[sid] = int(seen[-1]["seq"])


async def reader(ctx: _Ctx) -> None:
    known = dict.fromkeys(ctx.spec.sessions, 0)
    while ctx.alive():
        await ctx.pause()
        sid = ctx.rng.choice(ctx.spec.sessions)
        roll = ctx.rng.random()
        if roll < 0.08:
            after = 0
        elif roll < 0.2:
            after = ctx.rng.randint(0, known[sid])
        else:
            after = max(0, known[sid] - ctx.rng.randint(0, 12))
        limit = ctx.rng.choice([1, 2, 5, 50, 1000])
        if after == 0 and limit == 1000:
            limit = 50 if roll >= 0.04 else 1000
        done = await ctx.call(
            "read",
            sid,
            {"after": after, "limit": limit},
            partial(ctx.world.read, sid, after, limit=limit),
            entry_dicts,
        )
        if done.outcome == "ok" and done.value:
            known[sid] = max(known[sid], done.value[-1].seq)


async def worker(ctx: _Ctx) -> None:
    lease = ctx.spec.lease
    while ctx.alive():
        await ctx.pause()
        got = await ctx.call(
            "take_wake",
            None,
            {"lease": lease},
            partial(ctx.world.take_wake, lease=lease),
            lease_dict,
        )
        if got.outcome != "ok" or got.value is None:
            await asyncio.sleep(ctx.rng.uniform(0.02, 0.08))
            continue
        held: WakeLease = got.value
        sid, token = held.session_id, held.token
        taken = await ctx.call(
            "acquire", sid, {"lease": token}, partial(ctx.world.acquire, sid), fence_dict
        )
        if taken.outcome == "ok":
            fence: Fence = taken.value
            for _ in range(ctx.rng.randint(1, 3)):
                await ctx.pause()
                if ctx.rng.random() < 0.08:  # stall past the lease: it is delivered again
                    await asyncio.sleep(lease * 1.3)
                done = await _fenced_append(ctx, sid, fence, "step", 1, lease=token)
                if isinstance(done.error, Fenced):
                    await _fenced_append(ctx, sid, fence, "step", 1, lease=token)
                    break
                if ctx.rng.random() < 0.5:
                    renewed = await ctx.call(
                        "renew_wake",
                        sid,
                        {"token": token, "lease": lease},
                        partial(ctx.world.renew_wake, held, lease=lease),
                        lambda w: {"expires": w.expires_at.timestamp()},
                    )
                    if renewed.outcome == "ok":
                        held = renewed.value
        await ctx.call("finish_wake", sid, {"token": token}, partial(ctx.world.finish_wake, held))


async def poker(ctx: _Ctx) -> None:
    while ctx.alive():
        await ctx.pause(5.0)
        sid = ctx.rng.choice(ctx.spec.sessions)
        delay = ctx.rng.choice([0.0, 0.0, 0.2, 0.5])
        await ctx.call("wake", sid, {"delay": delay}, partial(ctx.world.wake, sid, delay=delay))


ROLES: dict[str, Role] = {
    "writer": writer,
    "prompter": prompter,
    "atomic": atomic,
    "follower": follower,
    "reader": reader,
    "worker": worker,
    "poker": poker,
}


async def run_role(world: World, spec: Spec, rec: Recorder, gate: Gate | None = None) -> None:
    """Play ``spec.role`` on ``world`` until ``spec.deadline``."""
    ctx = _Ctx(world, spec, rec, random.Random(spec.seed), gate)
    await ROLES[spec.role](ctx)


SETUP_TIMEOUT = 60.0
"""Seconds a child may take to open and set up the world (a server restarting)."""


async def _main(spec: Spec) -> int:
    assert spec.url is not None and spec.records is not None
    sink = FileSink(spec.records)
    for scheme, target in spec.extra.get("schemes", {}).items():
        register_scheme(scheme, target)
    world = open_world(spec.url)
    give_up = time.time() + SETUP_TIMEOUT
    try:
        while True:  # the connection may be cut or the server restarting
            try:
                await asyncio.wait_for(world.setup(), max(spec.op_timeout, 30.0))
                break
            except Exception as e:
                if time.time() > give_up:
                    print(f"{spec.name}: could not set the world up: {e!r}", file=sys.stderr)
                    return 3
                await asyncio.sleep(0.2)
        go = spec.extra.get("go")
        if isinstance(go, str):  # say we are ready, then start with everyone else
            _touch(spec.records + ".ready")
            while (deadline := _read_go(go)) is None:
                if time.time() > give_up + SETUP_TIMEOUT or os.getppid() != spec.extra["parent"]:
                    return 3
                await asyncio.sleep(0.02)
            spec.deadline = deadline
        await run_role(world, spec, Recorder(spec.name, sink))
    finally:
        try:
            await asyncio.wait_for(world.close(), spec.op_timeout)
        except Exception:
            pass
        sink.close()
    return 0


def _touch(path: str) -> None:
    with open(path, "w", encoding="utf-8"):
        pass


def _read_go(path: str) -> float | None:
    try:
        with open(path, encoding="utf-8") as f:
            return float(f.read())
    except (FileNotFoundError, ValueError):
        return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    with open(args[0], encoding="utf-8") as f:
        spec = Spec(**json.load(f))
    return asyncio.run(_main(spec))


if __name__ == "__main__":
    sys.exit(main())
