"""What the kit itself does after the process tier's workload, recorded like any
process: reopen the world, drain the wakes, retry every interrupted keyed append,
run the deterministic probes (scenarios the random workload may miss) and read
every log back. See :mod:`fxworld_conformance.procs`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from fxworld.errors import ConfigurationError, WorldError
from fxworld.protocol import World
from fxworld.types import Fence, WakeLease
from fxworld_conformance.checkers import history as hist
from fxworld_conformance.checkers.history import (
    Done,
    EntryDict,
    Finding,
    Op,
    Recorder,
    batch_entries,
    entry_dicts,
    fence_dict,
    lease_dict,
)
from fxworld_conformance.profiles import ProcessProfile as Profile
from fxworld_conformance.target import Target

__all__ = ["Unopenable"]


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
