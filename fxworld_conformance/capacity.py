"""The capacity check: hundreds of idle followers leave a world's other calls at
their usual speed (W10: a follower waits without taking what writers need).

A follower that holds something scarce while it waits (a pooled connection in a
blocking ``XREAD``, a slot of a small HTTP client pool, a poll loop of its own
against a store) makes a process with a few hundred open streams, an ``fxworld
serve`` with as many SSE clients, fail or slow down its writers and workers. This
check runs one world in one process:

1. it times appends, reads, wakes, ``take_wake`` and ``finish_wake`` with no
   follower (the world's own figures, in the same run, on the same machine);
2. it starts the profile's followers (300 under ``ci``, two on each idle session)
   and waits until each has yielded the entry already in its log;
3. it times the same calls again while all of them wait: each kind's median may
   grow by :data:`RATIO` or to :data:`FLOOR`, whichever is more (a median within 3
   times that bound is measured a second time before it fails: one burst of load
   on a shared machine is no verdict); no call may take longer than
   :data:`CUTOFF_RATIO` times the slowest of its kind alone, or
   :data:`CUTOFF_FLOOR`; every call must succeed;
4. a few followed sessions get one entry each, which every one of their followers
   must yield (W10), and every follower must stop when it is cancelled.

The figures (medians alone and with followers, in ms) are in the result's ``extra``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from fxworld.errors import WorldError
from fxworld.types import Entry, NewEntry
from fxworld_conformance.guarantees.probe import Probe, check
from fxworld_conformance.guarantees.scenario import Scenario
from fxworld_conformance.model import Violation
from fxworld_conformance.profiles import CapacityProfile
from fxworld_conformance.profiles import profile as kit_profile
from fxworld_conformance.target import CALL_TIMEOUT

__all__ = ["NAME", "capacity_check", "RATIO", "FLOOR", "CUTOFF_RATIO", "CUTOFF_FLOOR"]

T = TypeVar("T")

NAME = "W10 capacity: idle followers leave appends, reads and wakes at their usual speed"
"""The check's row in the kit's report (its pytest test is ``test_capacity``)."""

RATIO = 5.0
"""How much a call's median may grow while the followers wait."""
FLOOR = 0.025
"""Seconds: a median up to this is always within bounds (fast worlds, noisy machines)."""
CUTOFF_RATIO = 20.0
"""How much slower than the slowest of its kind alone one call may be."""
CUTOFF_FLOOR = 2.0
"""Seconds: the least time one call is given before the check fails it."""

_SEED_AT_ONCE = 16  # appends in flight while the followed sessions are made
_READY_WITHIN = 30.0  # s for every follower to yield the entry already in its log
_SETTLE = 0.3  # s for the followers to reach their wait after that first entry
_SEEN_WITHIN = 10.0  # s for a follower to yield a new entry (the W10 bound of the kit)
_STOP_WITHIN = 5.0  # s for cancelled followers to end
_PROBED = 5  # followed sessions that get a new entry at the end
_LEASE = 60.0
_WRITER, _WOKEN = "cap-writer", "cap-woken"
KINDS = ("append", "read", "wake", "take_wake", "finish_wake")


def capacity_check(profile: str) -> Scenario:
    """The check under ``profile`` (its sizes come from the kit's profile table)."""
    sizes = kit_profile(profile).capacity
    return Scenario("w10-capacity", NAME, ("W10",), functools.partial(_run, sizes=sizes))


@dataclass
class _Followers:
    """The followers' tasks and what they saw."""

    sessions: list[str]
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    seen: list[list[int]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    ready: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    """Set whenever a follower yields or fails."""

    def of(self, sid: str) -> list[int]:
        """Indexes of the followers of ``sid``."""
        return [i for i in range(len(self.tasks)) if self.sessions[i % len(self.sessions)] == sid]


async def _run(p: Probe, *, sizes: CapacityProfile) -> None:
    sessions = [f"cap-f{i}" for i in range((sizes.followers + 1) // 2)]
    await _seed(p, sessions)
    await _rounds(p, 2, limits=None)  # warm-up: connections, caches, scripts
    alone = await _rounds(p, sizes.rounds, limits=None)
    limits = {k: max(CUTOFF_RATIO * max(alone[k]), CUTOFF_FLOOR) for k in KINDS}
    followers = _Followers(sessions)
    try:
        await _start(p, followers, sizes.followers)
        loaded = await _rounds(p, sizes.rounds, limits=limits, followers=followers)
        if _over(alone, loaded, by=1.0) and not _over(alone, loaded, by=3.0):
            # close to the bound: once more before a verdict (one burst of load is none)
            again = await _rounds(p, sizes.rounds, limits=limits, followers=followers)
            loaded = {k: min(loaded[k], again[k], key=statistics.median) for k in KINDS}
        p.notes["medians_ms"] = {
            k: {"alone": _ms(alone[k]), f"{sizes.followers} followers": _ms(loaded[k])}
            for k in KINDS
        }
        _judge(alone, loaded, sizes.followers)
        _check_alive(followers)
        await _probe_followers(p, followers)
    finally:
        stuck = await _cancel(followers)
    check(
        not stuck,
        "W10",
        f"{stuck} of {len(followers.tasks)} cancelled followers still ran after {_STOP_WITHIN:g} s",
    )


async def _seed(p: Probe, sessions: list[str]) -> None:
    """One entry in each followed session (a few appends in flight at a time)."""
    gate = asyncio.Semaphore(_SEED_AT_ONCE)

    async def one(sid: str) -> None:
        async with gate:
            await p.append(sid, [NewEntry("seed", {"sid": sid})])

    await asyncio.gather(*(one(sid) for sid in sessions))


async def _rounds(
    p: Probe,
    n: int,
    *,
    limits: dict[str, float] | None,
    followers: _Followers | None = None,
) -> dict[str, list[float]]:
    """``n`` rounds of one call of each kind; the seconds each took, by kind."""
    took: dict[str, list[float]] = {k: [] for k in KINDS}
    waiting = "" if followers is None else f" while {len(followers.tasks)} followers waited"

    async def timed(kind: str, aw: Awaitable[T]) -> T:
        limit = CALL_TIMEOUT if limits is None else limits[kind]
        p.operations += 1
        started = time.perf_counter()
        result = await _bounded(aw, kind, waiting, limit)
        took[kind].append(time.perf_counter() - started)
        return result

    for i in range(n):
        seq = await timed("append", p.world.append(_WRITER, [NewEntry("message", {"i": i})]))
        await timed("read", p.world.read(_WRITER, max(seq - 1, 0)))
        await timed("wake", p.world.wake(_WOKEN))
        lease = await timed("take_wake", p.world.take_wake(lease=_LEASE))
        check(
            lease is not None and lease.session_id == _WOKEN,
            "W12",
            f"take_wake gave {lease!r} where the wake of {_WOKEN!r} was due{waiting}",
        )
        assert lease is not None
        await timed("finish_wake", p.world.finish_wake(lease))
        if followers is not None:
            _check_alive(followers)
    return took


async def _bounded(aw: Awaitable[T], kind: str, waiting: str, limit: float) -> T:
    """Await one call of the world within ``limit`` seconds; its failure breaks W10,
    a foreign exception W16."""
    try:
        return await asyncio.wait_for(aw, limit)
    except TimeoutError:
        raise Violation("W10", f"{kind} did not return within {limit:.2f} s{waiting}") from None
    except WorldError as e:
        raise Violation("W10", f"{kind} raised {type(e).__name__}{waiting}: {e}") from e
    except Exception as e:
        raise Violation("W16", f"{kind} raised {type(e).__name__}{waiting}: {e}") from e


async def _start(p: Probe, f: _Followers, n: int) -> None:
    """Start ``n`` followers, two to a session, and wait until each yielded seq 1."""
    for i in range(n):
        f.seen.append([])
        f.tasks.append(asyncio.create_task(_follow(p, f, i)))
    await _until(f, lambda: f.ready + len(f.failures) >= n, _READY_WITHIN)
    _check_alive(f)
    check(
        f.ready == n,
        "W10",
        f"only {f.ready} of {n} followers yielded the entry already in their log "
        f"within {_READY_WITHIN:g} s",
    )
    await asyncio.sleep(_SETTLE)


async def _follow(p: Probe, f: _Followers, i: int) -> None:
    sid = f.sessions[i % len(f.sessions)]
    it = p.world.follow(sid, 0)
    try:
        async for entry in it:
            _saw(f, i, entry)
    except WorldError as e:
        f.failures.append(f"follow({sid!r}) raised {type(e).__name__}: {e}")
    except Exception as e:  # a foreign exception: reported as W16 by _check_alive
        f.failures.append(f"W16: follow({sid!r}) raised {type(e).__name__}: {e}")
    finally:
        f.changed.set()
        aclose = getattr(it, "aclose", None)
        if aclose is not None:
            await aclose()


async def _until(f: _Followers, done: Callable[[], bool], within: float) -> None:
    """Return once ``done()`` holds, or after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not done() and (left := deadline - time.monotonic()) > 0:
        f.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(f.changed.wait(), left)


def _saw(f: _Followers, i: int, entry: Entry) -> None:
    seen = f.seen[i]
    if entry.seq != len(seen) + 1:
        f.failures.append(f"a follower yielded seq {entry.seq} after {seen} (a gap or a repeat)")
    seen.append(entry.seq)
    if entry.seq == 1:
        f.ready += 1
    f.changed.set()


def _check_alive(f: _Followers) -> None:
    if not f.failures:
        return
    first = f.failures[0]
    guarantee = "W16" if first.startswith("W16: ") else "W10"
    raise Violation(
        guarantee,
        f"{len(f.failures)} of {len(f.tasks)} idle followers failed; the first: "
        f"{first.removeprefix('W16: ')}",
    )


def _over(alone: dict[str, list[float]], loaded: dict[str, list[float]], *, by: float) -> bool:
    """Whether some kind's median is over ``by`` times its bound."""
    return any(statistics.median(loaded[k]) > by * _bound(alone[k]) for k in KINDS)


def _bound(alone: list[float]) -> float:
    return max(RATIO * statistics.median(alone), FLOOR)


def _judge(alone: dict[str, list[float]], loaded: dict[str, list[float]], n: int) -> None:
    slow = [
        f"{k}: median {_ms(loaded[k]):.2f} ms with {n} idle followers, "
        f"{_ms(alone[k]):.2f} ms without (bound {_bound(alone[k]) * 1000:.1f} ms)"
        for k in KINDS
        if statistics.median(loaded[k]) > _bound(alone[k])
    ]
    check(not slow, "W10", "idle followers slowed the world's other calls: " + "; ".join(slow))


async def _probe_followers(p: Probe, f: _Followers) -> None:
    """W10 under load: a new entry in a few followed sessions reaches all their followers."""
    step = max(1, len(f.sessions) // _PROBED)
    probed = f.sessions[::step][:_PROBED]
    await asyncio.gather(*(p.append(sid, [NewEntry("probe", {})]) for sid in probed))
    owed = [i for sid in probed for i in f.of(sid)]
    await _until(
        f, lambda: bool(f.failures) or all(len(f.seen[i]) >= 2 for i in owed), _SEEN_WITHIN
    )
    _check_alive(f)
    late = [i for i in owed if len(f.seen[i]) < 2]
    check(
        not late,
        "W10",
        f"{len(late)} of {len(owed)} followers did not yield a new entry of their session "
        f"within {_SEEN_WITHIN:g} s while {len(f.tasks)} followers waited",
    )


async def _cancel(f: _Followers) -> int:
    """Cancel every follower; how many still run :data:`_STOP_WITHIN` later."""
    for task in f.tasks:
        task.cancel()
    if not f.tasks:
        return 0
    _, pending = await asyncio.wait(f.tasks, timeout=_STOP_WITHIN)
    return len(pending)


def _ms(took: list[float]) -> float:
    return round(statistics.median(took) * 1000, 3)
