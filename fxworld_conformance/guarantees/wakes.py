"""Scenarios of wakes: append + wake, coalescing and due times, leases, finish
(W7, W11-W13), and wakes taken in batches (``fxworld.take_wakes``)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from fxworld import open_world, take_wakes
from fxworld.errors import Conflict, Fenced, InvalidArgument, InvalidEntry, LeaseLost
from fxworld.types import NewEntry, WakeLease
from fxworld.validate import MAX_WAKE_BATCH
from fxworld_conformance.guarantees.probe import (
    LATER,
    LIVE,
    OTHER,
    Probe,
    S,
    check,
    drain_wakes,
    e,
    no_wake,
    take_unless_early,
    take_when_due,
    too_slow,
)
from fxworld_conformance.guarantees.scenario import Group
from fxworld_conformance.model import Violation

__all__ = ["SCENARIOS", "take_batch", "drain_batches"]

SCENARIOS = Group()

# -- W7 append + wake ----------------------------------------------------------------


@SCENARIOS("append with wake enqueues a wake, due now or later")
async def w7_append_wake(p: Probe) -> None:
    await no_wake(p)
    seq = await p.append(S, [e("prompt")], wake=0)
    lease = await p.take(5)
    check(
        lease is not None and (lease.session_id, lease.attempt) == (S, 1) and seq == 1,
        "W7",
        f"append(wake=0) then take_wake gave {lease!r}",
    )
    t0 = time.monotonic()
    await p.append(OTHER, [e()], wake=0.6)
    later = await take_unless_early(p, t0, 0.6)
    later = await take_when_due(p, later, 0.9)
    check(later.session_id == OTHER, "W7", f"append(wake=0.6) then take_wake gave {later!r}")


@SCENARIOS("a refused append owes no wake", also=("W2", "W5"))
async def w7_refused_append_owes_no_wake(p: Probe) -> None:
    w = p.world
    old = await p.acquire(S)
    await p.acquire(S)
    await p.expect_error(
        Fenced, "append(stale fence, wake=0)", w.append(S, [e()], fence=old, wake=0), "W2"
    )
    await p.expect_error(
        Conflict, "append(expect=0, wake=0)", w.append(S, [e()], expect=0, wake=0), "W5"
    )
    await p.expect_error(
        InvalidEntry, "append(fence kind, wake=0)", w.append(S, [NewEntry("fence", {})], wake=0)
    )
    await no_wake(p)


# -- W11 wake coalescing -------------------------------------------------------------


@SCENARIOS("wakes of one session coalesce, keeping the earlier due time")
async def w11_coalesce(p: Probe) -> None:
    await p.wake(S)
    await p.wake(S)
    await p.append(S, [e()], wake=0)
    got = await p.take(5)
    check(got is not None and got.session_id == S, "W11", f"take_wake gave {got!r}")
    again = await p.take()
    if again is not None and again.session_id == S:
        raise Violation("W12", f"a wake under a live lease was handed out again: {again!r}")
    check(again is None, "W11", f"three wake requests gave two pending wakes: {again!r}")
    assert got is not None
    await p.finish(got)
    await no_wake(p)
    for sid, first, second in (("t", LATER, 0.0), ("u", 0.0, LATER)):
        await p.wake(sid, first)
        await p.wake(sid, second)
        got = await p.take()
        check(
            got is not None and got.session_id == sid,
            "W11",
            f"wake({second:g}) after wake({first:g}) must keep the earlier due time; "
            f"take_wake gave {got!r}",
        )


@SCENARIOS("a wake is never delivered before its due time")
async def w11_never_early(p: Probe) -> None:
    t0 = time.monotonic()
    await p.wake(S, 0.6)
    await p.wake(OTHER, LATER)
    early = await p.take()
    check(early is None, "W11", f"a wake due in {LATER:g} s was delivered at once: {early!r}")
    lease = await take_unless_early(p, t0, 0.6)
    if lease is None:
        await asyncio.sleep(0.2)
        lease = await take_unless_early(p, t0, 0.6)
    lease = await take_when_due(p, lease, 0.7)
    check(lease.session_id == S, "W11", f"take_wake gave {lease!r}")
    check(await p.take() is None, "W11", "a wake due in an hour was delivered")


@SCENARIOS("each session has its own wake")
async def w11_each_session_its_own(p: Probe) -> None:
    sessions = [f"s{i}" for i in range(5)]
    for sid in sessions:
        await p.wake(sid)
    taken = [await p.take(5) for _ in range(5)]
    got = sorted(t.session_id for t in taken if t is not None)
    check(got == sessions, "W11", f"five sessions woken, take_wake gave {got}")
    await no_wake(p)


# -- W12 lease -----------------------------------------------------------------------


@SCENARIOS("a due wake goes to one taker under a lease; none when nothing is due")
async def w12_one_taker(p: Probe) -> None:
    assert await p.take(5) is None
    await p.append(S, [e()])  # an append without wake= owes no wake
    check(await p.take(5) is None, "W12", "an append without wake= enqueued a wake")
    await p.wake(S)
    leases = await asyncio.gather(*(p.take(5) for _ in range(6)))
    got = [x for x in leases if x is not None]
    check(len(got) == 1, "W12", f"6 racing take_wake calls for one wake gave {got}")
    check(
        got[0].session_id == S and got[0].attempt == 1 and got[0].expires_at > datetime.now(UTC),
        "W12",
        f"first delivery: {got[0]!r}",
    )


@SCENARIOS("leases, expiry, redelivery with attempt + 1, LeaseLost for the old holder")
async def w12_lease(p: Probe) -> None:
    w = p.world
    await p.wake(S)
    t0 = time.monotonic()
    first = await p.take(0.3)
    check(first is not None and first.attempt == 1, "W12", f"first delivery: {first!r}")
    assert first is not None
    second = await take_unless_early(p, t0, 0.3, "W12")  # nobody else while it lasts
    second = await take_when_due(p, second, 0.6)
    check(
        (second.session_id, second.attempt) == (S, 2) and second.token != first.token,
        "W12",
        f"an expired lease must be delivered again with attempt 2: {second!r}",
    )
    await p.expect_error(LeaseLost, "renew_wake of an expired lease", w.renew_wake(first, lease=5))
    await p.expect_error(LeaseLost, "finish_wake of an expired lease", w.finish_wake(first))
    renewed = await p.renew(second, 5)  # the stale holder changed nothing
    await p.finish(renewed)
    await no_wake(p)
    await p.expect_error(LeaseLost, "finish_wake twice", w.finish_wake(renewed))


@SCENARIOS("renew extends the lease")
async def w12_renew(p: Probe) -> None:
    await p.wake(S)
    t0 = time.monotonic()
    lease = await p.take(0.5)
    assert lease is not None
    try:
        renewed = await p.world.renew_wake(lease, lease=30)
    except LeaseLost:
        too_slow(t0, 0.5)
        raise
    check(
        renewed.session_id == S
        and renewed.token == lease.token
        and renewed.attempt == lease.attempt
        and renewed.expires_at > lease.expires_at,
        "W12",
        f"renew_wake returned {renewed!r} for {lease!r}",
    )
    await asyncio.sleep(0.8)
    check(await p.take(5) is None, "W12", "a renewed lease was handed out again")
    await p.finish(renewed)


@SCENARIOS("renew or finish after expiry raise LeaseLost, and the wake is not lost")
async def w12_after_expiry(p: Probe) -> None:
    w = p.world
    await p.wake(S)
    lease = await p.take(0.2)
    assert lease is not None
    await asyncio.sleep(0.5)
    await p.expect_error(LeaseLost, "renew_wake after expiry", w.renew_wake(lease, lease=5))
    await p.expect_error(LeaseLost, "finish_wake after expiry", w.finish_wake(lease))
    again = await p.take(5)
    check(
        again is not None and again.session_id == S and again.attempt == 2,
        "W12",
        f"after an expired lease, take_wake gave {again!r}",
    )


@SCENARIOS("a forged token is refused")
async def w12_forged_token(p: Probe) -> None:
    w = p.world
    await p.wake(S)
    lease = await p.take(5)
    assert lease is not None
    forged = WakeLease(S, "0" * 32, lease.attempt, lease.expires_at)
    await p.expect_error(LeaseLost, "renew_wake(forged)", w.renew_wake(forged, lease=5))
    await p.expect_error(LeaseLost, "finish_wake(forged)", w.finish_wake(forged))
    elsewhere = WakeLease(OTHER, lease.token, 1, lease.expires_at)
    await p.expect_error(LeaseLost, "finish_wake(another session)", w.finish_wake(elsewhere))
    await p.finish(lease)


async def take_batch(p: Probe, limit: int, lease: float = 120.0) -> list[WakeLease]:
    """``fxworld.take_wakes`` through the probe, its reply checked for shape: a list
    of at most ``limit`` leases, each session at most once (W12)."""
    what = f"take_wakes(lease={lease:g}, limit={limit})"
    got = await p.call(what, take_wakes(p.world, lease=lease, limit=limit))
    check(
        isinstance(got, list) and len(got) <= limit and all(isinstance(w, WakeLease) for w in got),
        "W12",
        f"{what} returned {got!r}",
    )
    sids = [w.session_id for w in got]
    check(len(set(sids)) == len(sids), "W12", f"{what} holds one session twice: {sids}")
    return got


async def drain_batches(p: Probe, limit: int, lease: float = 120.0) -> list[WakeLease]:
    """Batches until one comes back empty; no session may come twice while its
    lease lasts (W12)."""
    got: list[WakeLease] = []
    while batch := await take_batch(p, limit, lease):
        got += batch
        check(len(got) <= 50, "W11", "take_wakes keeps handing out wakes (over 50)")
    sids = [w.session_id for w in got]
    check(
        len(set(sids)) == len(sids),
        "W12",
        f"a wake under a live lease was handed out again by a later batch: {sids}",
    )
    return got


@SCENARIOS(
    "each wake of a batch (take_wakes) is leased as take_wake leases one, each session once",
    also=("W11", "W13", "W15"),
)
async def w12_take_wakes(p: Probe) -> None:
    """Each wake of a batch is leased as ``take_wake`` leases one (W11-W13 per wake),
    each session once; a bad ``limit`` is refused and takes nothing (W15)."""
    await drain_wakes(p)
    await p.wake("a")
    for bad in (0, -1, MAX_WAKE_BATCH + 1, True, 2.0, "3", None):
        await p.expect_error(
            InvalidArgument,
            f"take_wakes(limit={bad!r})",
            take_wakes(p.world, lease=120.0, limit=bad),  # type: ignore[arg-type]
            "W15",
        )
    for sid in ("b", "c", "d", "e"):
        await p.wake(sid)
    await p.wake("later", LATER)
    first = await take_batch(p, 2)
    check(bool(first), "W12", "take_wakes gave [] though five wakes are due")
    got = first + await drain_batches(p, 10)
    sids = sorted(w.session_id for w in got)
    check("later" not in sids, "W11", f"take_wakes handed out a wake due in {LATER:g} s")
    check("a" in sids, "W15", f"a refused take_wakes took the wake of 'a': batches gave {sids}")
    check(
        sids == ["a", "b", "c", "d", "e"],
        "W12",
        f"batches must hand out each of the five due wakes once, got {sids}",
    )
    check(all(w.attempt == 1 for w in got), "W12", f"first deliveries must have attempt 1: {got}")
    check(await p.take() is None, "W12", "take_wake handed out a wake a batch holds")
    for w in got:
        await p.finish(w)
    await batch_leases_are_each_their_own(p)
    await batch_rewake_survives_finish(p)
    await racing_batches_share_nothing(p)


async def batch_leases_are_each_their_own(p: Probe) -> None:
    """Two wakes taken together under a short lease: one renewed, the other left to
    expire, which alone is delivered again with attempt 2 (W12)."""
    await p.wake("s")
    await p.wake("t")
    batch = await drain_batches(p, 2, lease=1.0)
    check(len(batch) == 2, "W12", f"two due wakes, batches gave {batch}")
    kept, left = batch
    kept = await p.renew(kept, 120.0)
    await asyncio.sleep(1.4)
    again = await drain_batches(p, 10)
    check(
        [(w.session_id, w.attempt) for w in again] == [(left.session_id, 2)],
        "W12",
        f"of a batch of two, {left.session_id!r}'s lease expired and {kept.session_id!r}'s "
        f"was renewed: only the first must be delivered again, with attempt 2; got {again}",
    )
    await p.expect_error(
        LeaseLost,
        "renew_wake of an expired lease from a batch",
        p.world.renew_wake(left, lease=10.0),
        "W12",
    )
    await p.finish(kept)
    await p.finish(again[0])


async def batch_rewake_survives_finish(p: Probe) -> None:
    """A ``wake()`` after a batch was taken keeps that session due after its finish,
    and is not handed out while the lease lasts (W12, W13)."""
    await p.wake("u")
    await p.wake("v")
    batch = await drain_batches(p, 10)
    check(len(batch) == 2, "W12", f"two due wakes, batches gave {batch}")
    await p.wake("u")
    during = await take_batch(p, 10)
    check(
        during == [],
        "W12",
        f"a wake() during the lease made the leased session be handed out again: {during}",
    )
    for w in batch:
        await p.finish(w)
    after = await drain_batches(p, 10)
    check(
        [(w.session_id, w.attempt) for w in after] == [("u", 1)],
        "W13",
        f"after finishing a batch of u and v with a wake(u) during it, u (attempt 1) and "
        f"only u must be due; got {after}",
    )
    await p.finish(after[0])


async def racing_batches_share_nothing(p: Probe) -> None:
    """Batches and single takes racing for eight due wakes: each wake goes to one
    taker (W12), and none is lost (W13)."""
    sessions = [f"r{i}" for i in range(8)]
    for sid in sessions:
        await p.wake(sid)
    racing = await asyncio.gather(
        *(take_batch(p, 3) for _ in range(4)), *(p.take() for _ in range(2))
    )
    got = [w for r in racing for w in (r if isinstance(r, list) else [r]) if w is not None]
    got += await drain_batches(p, 10)
    sids = sorted(w.session_id for w in got)
    check(
        sids == sessions,
        "W12",
        f"racing takers must share the eight due wakes, each once; got {sids}",
    )


# -- W13 finish ----------------------------------------------------------------------


@SCENARIOS("finish removes the wake")
async def w13_finish(p: Probe) -> None:
    await p.wake(S)
    t0 = time.monotonic()
    lease = await p.take(0.3)
    assert lease is not None
    try:
        await p.world.finish_wake(lease)
    except LeaseLost:
        too_slow(t0, 0.3)
        raise
    await asyncio.sleep(0.5)  # not delivered again after the lease would have ended
    await no_wake(p)
    await p.expect_error(LeaseLost, "finish_wake twice", p.world.finish_wake(lease), "W12")


@SCENARIOS("a wake during the lease keeps the session due after finish")
async def w13_rewake_kept(p: Probe) -> None:
    await p.wake(S)
    lease = await p.take(5)
    assert lease is not None
    await p.wake(S)  # a prompt arrives while it runs
    check(await p.take(5) is None, "W12", "a wake under a live lease was handed out again")
    await p.finish(lease)
    again = await p.take(5)
    check(
        again is not None and (again.session_id, again.attempt) == (S, 1),
        "W13",
        f"a wake() during the lease was lost when the lease finished: take_wake gave {again!r}",
    )
    assert again is not None
    await p.finish(again)
    await no_wake(p)


@SCENARIOS("a later request keeps its own due time")
async def w13_later_request_keeps_due_time(p: Probe) -> None:
    await p.wake(S)
    lease = await p.take(5)
    assert lease is not None
    t0 = time.monotonic()
    await p.wake(S, 0.6)
    await p.finish(lease)
    again = await take_unless_early(p, t0, 0.6)  # not before its due time
    again = await take_when_due(p, again, 0.9)
    check(again.session_id == S and again.attempt == 1, "W13", f"take_wake gave {again!r}")
    await p.finish(again)
    await p.wake("t")
    c = await p.take()
    assert c is not None
    await p.wake("t", LATER)
    await p.finish(c)
    check(await p.take() is None, "W11", "a re-wake due later was delivered at once after finish")


@SCENARIOS("a redelivery after an expired lease covers a request made during it")
async def w13_redelivery_covers_request(p: Probe) -> None:
    await p.wake(S)
    first = await p.take(0.2)
    assert first is not None
    await p.wake(S)
    await asyncio.sleep(0.4)
    second = await p.take(5)
    check(second is not None and second.session_id == S, "W12", f"redelivery: {second!r}")
    assert second is not None
    await p.finish(second)
    await no_wake(p)


@SCENARIOS("a redelivery covers a request not yet due")
async def w13_redelivery_covers_request_not_yet_due(p: Probe) -> None:
    """A request made during a lease that then expired, due only after the
    redelivery is taken: the redelivery covers it (W13: only a request after the
    take keeps the session due), so once it is finished nothing is left, not even
    when that request's due time comes."""
    await p.wake(S)
    first = await p.take(0.2)
    assert first is not None
    await p.wake(S, 1.2)
    await asyncio.sleep(0.4)
    second = await p.take(5)
    check(
        second is not None and (second.session_id, second.attempt) == (S, 2),
        "W12",
        f"redelivery: {second!r}",
    )
    assert second is not None
    await p.finish(second)
    await asyncio.sleep(1.2)  # past the request's due time
    await no_wake(p)


@SCENARIOS("a take covers an append's wake whose writer paused after it returned", also=("W13",))
async def w11_take_covers_append_wake_of_paused_writer(p: Probe) -> None:
    """Another process's ``append(wake=1)`` returns while the session is due
    already, and that process stops at once (as a process the OS stopped). A take
    in this process leases the session: the append came before the take, so the
    take covers its request too (W11: the earlier due time is kept). Once the lease
    is finished nothing is left, not when the writer runs on, nor when the
    append's due time comes (S3 delivered it again then, attempt 1)."""
    await p.wake(S)
    async with _append_then_pause(p, S, wake=1.0):
        lease = await p.take(5)
        check(
            lease is not None and (lease.session_id, lease.attempt) == (S, 1),
            "W12",
            f"take: {lease!r}",
        )
    assert lease is not None
    await p.finish(lease)
    await asyncio.sleep(1.2)  # past the append's due time
    await no_wake(p)


@contextlib.asynccontextmanager
async def _append_then_pause(p: Probe, sid: str, *, wake: float) -> AsyncIterator[None]:
    """``append(sid, [e()], wake=wake)`` by a second world opened on ``p.url`` (if
    the world is shared), in a thread and event loop of its own that then stand
    still until the block ends: what that world does in the background after the
    call returned waits meanwhile. Then it runs on and is closed. A world that is
    not shared (or has no URL) appends itself, and nothing pauses."""
    url = p.url
    if url is None or "shared" not in getattr(p.world, "capabilities", ()):
        await p.append(sid, [e()], wake=wake)
        yield
        return
    appended, resume = threading.Event(), threading.Event()

    async def writer() -> None:
        other = open_world(url)
        await other.setup()
        try:
            await other.append(sid, [e()], wake=wake)
            appended.set()
            resume.wait(LIVE * 6)  # blocks this event loop: the process is stopped
        finally:
            await other.close()

    running = asyncio.ensure_future(asyncio.to_thread(asyncio.run, writer()))
    try:
        while not appended.is_set():
            if running.done():
                running.result()  # the writer failed: its error
            await asyncio.sleep(0.005)
        yield
    finally:
        resume.set()
        await running
