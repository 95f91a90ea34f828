"""No starvation (#28 item 4): many sessions due at once, 8 takers taking them in
batches, and every session taken is woken again at once, so it is due again and
again. Every session due first is taken before any session that came due after it
(beyond a granularity of GRAIN), however often the others come back: none waits
while others are taken again and again. On PostgreSQL and Redis (the 10,000
sessions and real workers are in benchmarks/bench_fleet.py's starvation run)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from fxworld import open_world, take_wakes
from fxworld.types import WakeLease

SESSIONS = 1500
TAKERS = 8
BATCH = 10
LEASE = 30.0
GRAIN = timedelta(milliseconds=50)
"""Concurrent takes see the queue at slightly different moments: a take may pass a
session that a take in flight beside it holds locked (and takes)."""


@pytest.mark.parametrize("backend", ["postgres", "redis"])
async def test_sessions_due_first_are_taken_first_while_others_return(
    backend: str, request: pytest.FixtureRequest
) -> None:
    world = open_world(request.getfixturevalue("pg_url" if backend == "postgres" else "redis_url"))
    try:
        due: dict[str, datetime] = {}  # an upper bound of each first due time
        for i in range(0, SESSIONS, 100):
            sids = [f"s{j:05d}" for j in range(i, i + 100)]
            await asyncio.gather(*(world.wake(sid) for sid in sids))
            due.update(dict.fromkeys(sids, datetime.now(UTC)))
        first, again = await _churn(world, set(due))
    finally:
        await world.close()
    assert set(first) == set(due)  # every session taken
    late = [
        (sid, again_due, taken)
        for sid, taken in first.items()
        for again_due, again_taken in again
        if due[sid] < again_due - GRAIN and taken > again_taken + GRAIN
    ]
    assert not late, late[:5]  # none passed by a session that came due after it
    waits = sorted((first[sid] - due[sid]).total_seconds() for sid in due)
    print(f"{backend}: {len(again)} takes again; wait p50 {waits[len(waits) // 2]:.3f} s")


async def _churn(
    world: object, pending: set[str]
) -> tuple[dict[str, datetime], list[tuple[datetime, datetime]]]:
    """Take until every session in ``pending`` was taken once; each taken session is
    finished and woken again at once. Returns when each was first taken and, for
    each take of a session woken again, (the lower bound of its due time, taken)."""
    first: dict[str, datetime] = {}
    woken: dict[str, datetime] = {}  # a lower bound of the latest due time
    again: list[tuple[datetime, datetime]] = []
    end = time.monotonic() + 120

    async def taker() -> None:
        while pending and time.monotonic() < end:
            for lease in await take_wakes(world, lease=LEASE, limit=BATCH):  # type: ignore[arg-type]
                taken = _taken_at(lease)
                if lease.session_id in woken:
                    again.append((woken[lease.session_id], taken))
                else:
                    first[lease.session_id] = taken
                    pending.discard(lease.session_id)
                await world.finish_wake(lease)  # type: ignore[attr-defined]
                woken[lease.session_id] = datetime.now(UTC)
                await world.wake(lease.session_id)  # type: ignore[attr-defined]

    await asyncio.gather(*(taker() for _ in range(TAKERS)))
    return first, again


def _taken_at(lease: WakeLease) -> datetime:
    """When the store took it, by the store's clock (the lease ends LEASE after)."""
    return lease.expires_at - timedelta(seconds=LEASE)
