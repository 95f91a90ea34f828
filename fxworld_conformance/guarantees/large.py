"""Scenarios of large values (W18): an entry of several MiB is one entry like any
other, whole or absent, fenced, and gone with its session (docs/large-values.md).

The value is :data:`LARGE` bytes (or the world's ``max_entry_bytes``, if lower):
over the old 1 MiB default and over the size at which the first-party worlds store
data another way (text rather than jsonb on PostgreSQL, a reference in segments on
S3), so those paths are the ones proven.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fxworld.errors import Fenced
from fxworld.types import NewEntry
from fxworld.validate import DEFAULT_MAX_ENTRY_BYTES
from fxworld_conformance.guarantees.probe import (
    LIVE,
    OTHER,
    Probe,
    S,
    Skip,
    check,
    e,
    follow_first,
    show,
)
from fxworld_conformance.guarantees.scenario import Group

__all__ = ["SCENARIOS", "LARGE", "large_value"]

SCENARIOS = Group()

LARGE = 4 * 1024 * 1024
"""The size of the large values the scenarios write, in bytes of encoded data."""


def large_value(p: Probe, tag: str) -> dict[str, Any]:
    """Entry data of about :data:`LARGE` bytes (quotes, escapes and non-ASCII text
    in it), within the world's ``max_entry_bytes``; :class:`Skip` below 2 MiB."""
    limit = int(getattr(p.world, "max_entry_bytes", DEFAULT_MAX_ENTRY_BYTES))
    if limit < 2 * 1024 * 1024:
        raise Skip(f"the world's max_entry_bytes ({limit}) is under 2 MiB: no large value fits")
    size = min(LARGE, limit) - 256
    text = f'{tag} "quoted" \\ é 🙂\n'
    return {"tag": tag, "x": (text * (size // 48 + 1))[: size // 2], "n": list(range(100))}


def _summary(data: Any) -> str:
    if not isinstance(data, dict):
        return repr(data)[:80]
    return f"tag={data.get('tag')!r}, {len(str(data.get('x', '')))} characters of x"


@SCENARIOS(
    "a large value lands whole at one seq and reads back whole; no reader sees part of it",
    also=("W2", "W4", "W9", "W10"),
)
async def w18_large_value_whole(p: Probe) -> None:
    w = p.world
    value = large_value(p, "whole")
    fence = await p.acquire(S)
    seen: list[str] = []
    done = asyncio.Event()

    async def reader() -> None:  # reads while the value is written: all of it or none
        while not done.is_set():
            for x in await w.read(S, 0, limit=10):
                if x.kind == "large" and x.data != value:
                    seen.append(f"seq {x.seq}: {_summary(x.data)}")
            await asyncio.sleep(0.005)

    task = asyncio.ensure_future(reader())
    try:
        seq = await p.append(S, [e(n=1), NewEntry("large", value), e(n=2)], fence=fence)
        await asyncio.sleep(0.05)
    finally:
        done.set()
        await task
    check(seq == fence.seq + 3, "W4", f"an append of three entries, one large, returned {seq}")
    check(not seen, "W18", f"a reader saw part of a large value: {seen[:3]}")
    log = await p.read_all(S)
    kinds = [(x.seq, x.kind) for x in log]
    check(kinds == [(1, "fence"), (2, "msg"), (3, "large"), (4, "msg")], "W4", f"log {kinds}")
    check(log[2].data == value, "W18", f"read gave {_summary(log[2].data)}, not the value written")
    check(log[2].epoch == fence.epoch, "W2", f"the large entry has epoch {log[2].epoch}")
    alone = await p.read(S, 2, limit=1)
    check([x.data for x in alone] == [value], "W18", "read(after=2, limit=1) of the large value")
    got = await follow_first(w, S, 2)
    check(got.seq == 3, "W10", f"follow after seq 2 began at seq {got.seq}")
    check(got.data == value, "W18", f"follow gave {_summary(got.data)}, not the value written")
    second = large_value(p, "second")
    it = w.follow(S, 4)
    nxt = asyncio.ensure_future(anext(it))
    try:
        await p.append(S, [NewEntry("large", second)], fence=fence)
        followed = await asyncio.wait_for(nxt, LIVE * 4)
    finally:
        nxt.cancel()
        await it.aclose()  # type: ignore[attr-defined]
    check(followed.seq == 5, "W10", f"a follower waiting after seq 4 got seq {followed.seq}")
    check(followed.data == second, "W18", f"a waiting follower got {_summary(followed.data)}")


@SCENARIOS("a fenced-out writer's large value never lands", also=("W2",))
async def w18_large_value_fenced(p: Probe) -> None:
    w = p.world
    old = await p.acquire(S)
    await p.append(S, [e(n=1)], fence=old)
    new = await p.acquire(S)
    for attempt in range(2):
        await p.expect_error(
            Fenced,
            f"a large append with a replaced fence (attempt {attempt + 1})",
            w.append(S, [NewEntry("large", large_value(p, "stale"))], fence=old, wake=0),
            "W2",
        )
    log = await p.read_all(S)
    check(
        [x.kind for x in log] == ["fence", "msg", "fence"],
        "W2",
        f"after a refused large append the log is {show(log)}",
    )
    value = large_value(p, "new")
    seq = await p.append(S, [NewEntry("large", value)], fence=new)
    check([x.data for x in await p.read(S, seq - 1)] == [value], "W18", "the new writer's value")


@SCENARIOS("delete removes a large value: a new one at its position reads as itself", also=("W14",))
async def w18_large_value_deleted(p: Probe) -> None:
    first, second = large_value(p, "before delete"), large_value(p, "after delete")
    await p.append(S, [e(n=1), NewEntry("large", first)])
    await p.append(OTHER, [NewEntry("large", first)])
    await p.delete(S)
    check(await p.read(S) == [], "W14", "the log read after delete is not empty")
    seq = await p.append(S, [e(n=2), NewEntry("large", second)])
    check(seq == 2, "W14", f"an append after delete returned {seq}")
    log = await p.read_all(S)
    check(
        [x.data for x in log] == [{"n": 2}, second],
        "W18",
        f"after delete and a new large value at seq 2, read gave "
        f"{[_summary(x.data) for x in log]}: the deleted value is still there",
    )
    kept = await p.read_all(OTHER)
    check([x.data for x in kept] == [first], "W14", "delete of one session changed another's")
