"""What the example tests share: the sessions they use, seeding, snapshots and
waiting helpers."""

from __future__ import annotations

import asyncio
import itertools
import time
from datetime import datetime
from typing import Any

import pytest

from fxworld import Entry, Fence, NewEntry, WakeLease, World
from fxworld.protocol import SessionLister

S = "s1"
OTHER = "s2"
LIVE = 5.0  # seconds: generous liveness timeout on a loaded machine

RESERVED_KINDS = ["fence", "fence.x", "fencepost"]
BAD_KINDS: dict[str, Any] = {"empty": "", "65-chars": "k" * 65, "int": 5, "none": None}
NON_OBJECT_DATA: list[Any] = [[], [1, 2], "text", None, 5, 1.5, True]


def nested(depth: int) -> dict[str, Any]:
    """``{"a": {"a": ...}}``, ``depth`` levels deep."""
    out: dict[str, Any] = {}
    for _ in range(depth):
        out = {"a": out}
    return out


NON_JSON_DATA: dict[str, Any] = {
    "object": {"a": object()},
    "set": {"a": {1, 2}},
    "bytes": {"a": b"bytes"},
    "nan": {"a": float("nan")},
    "inf": {"a": float("inf")},
    "nested-minus-inf": {"a": {"deep": float("-inf")}},
    "tuple": {"a": (1, 2)},
    "int-key": {1: "int key"},
    "tuple-key": {(1, 2): "tuple key"},
    "datetime": {"a": datetime(2020, 1, 1)},
    "nested-5000-deep": nested(5000),
}
BAD_ENTRY_LISTS: list[Any] = [[], "abc", NewEntry("k", {}), [("k", {})], [{"kind": "k"}]]
# 2**64 and 1e300 fit no backend's integer or timestamp: refused, never a driver error
BAD_EXPECTS: list[Any] = [-1, 1.5, "3", True, 2**64]
BAD_LIMITS: list[Any] = [0, -1, 1.5, "10", True, 2**64]
BAD_AFTERS: list[Any] = [-1, 1.5, "1", 2**64]
BAD_DELAYS: list[Any] = [-1, -0.001, float("nan"), float("inf"), "1", True, 1e300]
BAD_LEASES: list[Any] = [0, -1, float("nan"), float("inf"), "1", False, 1e300]
BAD_KEYS: dict[str, Any] = {"empty": "", "257-chars": "k" * 257, "int": 5}


def e(kind: str = "msg", **data: Any) -> NewEntry:
    return NewEntry(kind, data)


async def all_entries(world: World, sid: str) -> list[Entry]:
    out: list[Entry] = []
    while True:
        batch = await world.read(sid, out[-1].seq if out else 0)
        if not batch:
            return out
        out.extend(batch)


def view(entries: list[Entry]) -> list[tuple[int, str, dict[str, Any], int | None]]:
    """What a log shows, without commit times."""
    return [(x.seq, x.kind, x.data, x.epoch) for x in entries]


async def snapshot(world: World) -> tuple[object, ...]:
    """Everything the tests seeded, as a comparable value."""
    logs = (view(await all_entries(world, S)), view(await all_entries(world, OTHER)))
    listed = await world.list_sessions() if isinstance(world, SessionLister) else None
    return (logs, listed)


async def seed(world: World) -> tuple[Fence, tuple[object, ...]]:
    """A session with a fence and a few entries, and no wake pending."""
    fence = await world.acquire(S)
    await world.append(S, [e(n=1), e(n=2)], fence=fence, key="seed-1")
    await world.append(S, [e("prompt", text="hi")])
    return fence, await snapshot(world)


async def no_wake(world: World) -> None:
    lease = await world.take_wake(lease=5)
    assert lease is None, f"a wake was enqueued: {lease}"


async def follow_first(world: World, sid: Any, after: Any = 0) -> Entry:
    """The first entry ``follow`` yields (validation may happen at the call or at
    the first step)."""
    it = world.follow(sid, after)
    try:
        return await asyncio.wait_for(anext(it), LIVE)
    finally:
        aclose = getattr(it, "aclose", None)
        if aclose is not None:
            await aclose()


async def take_unless_early(world: World, since: float, due_in: float) -> WakeLease | None:
    """``take_wake``, failing if it hands out a wake before ``due_in`` seconds after
    ``since`` (a ``time.monotonic()`` read before the call that set the due time).

    On a loaded machine the call may end after the due time; then a lease is
    legitimate, so the check never fails falsely.
    """
    lease = await world.take_wake(lease=5)
    if lease is not None:
        elapsed = time.monotonic() - since
        assert elapsed >= due_in, f"{lease} delivered {elapsed:.3f}s in, due at {due_in}s"
    return lease


async def take_when_due(world: World, lease: WakeLease | None, wait: float) -> WakeLease:
    """``lease`` if already taken, else the wake taken after ``wait`` seconds."""
    if lease is None:
        await asyncio.sleep(wait)
        lease = await world.take_wake(lease=5)
    assert lease is not None, "a due wake was not delivered"
    return lease


def too_slow(since: float, budget: float) -> None:
    """Skip a timing check the machine was too loaded to make meaningful."""
    if time.monotonic() - since >= budget:
        pytest.skip(f"the machine took over {budget}s for a step that needed less")


def epochs_monotone(entries: list[Entry]) -> bool:
    epochs = [x.epoch for x in entries if x.epoch is not None]
    return all(a <= b for a, b in itertools.pairwise(epochs))
