"""Directed checks of wakes and delete: coalescing and due times, leases, finish,
delete (W11-W14), and wakes taken in batches (``fxworld.take_wakes``)."""

from __future__ import annotations

import asyncio
import time

from fxworld import take_wakes
from fxworld.errors import Fenced, InvalidArgument, LeaseLost
from fxworld.types import WakeLease
from fxworld.validate import MAX_WAKE_BATCH
from fxworld_conformance.directed.probe import Probe, check, drain_wakes, msgs
from fxworld_conformance.model import Violation
from fxworld_conformance.target import Target

__all__ = ["w11_coalesce", "w12_lease", "w12_take_wakes", "w13_finish", "w14_delete"]


LATER = 3600.0


async def w11_coalesce(p: Probe, target: Target) -> None:
    await drain_wakes(p)
    await p.wake("s", LATER)
    await p.wake("s", LATER)
    early = await p.take()
    check(early is None, "W11", f"a wake due in {LATER:g} s was delivered at once: {early!r}")
    await p.wake("s", 0.0)
    got = await p.take()
    check(
        got is not None and got.session_id == "s",
        "W11",
        f"wake(0) after wake(3600) must keep the earlier due time; take_wake gave {got!r}",
    )
    again = await p.take()
    if again is not None and again.session_id == "s":
        raise Violation("W12", f"a wake under a live lease was handed out again: {again!r}")
    check(again is None, "W11", f"two wake() calls gave two pending wakes: {again!r}")
    assert got is not None
    await p.finish(got)
    await p.wake("t", 0.0)
    await p.wake("t", LATER)
    got = await p.take()
    check(
        got is not None and got.session_id == "t",
        "W11",
        f"wake(3600) after wake(0) must keep the earlier due time; take_wake gave {got!r}",
    )
    t0 = time.monotonic()
    await p.wake("u", 1.0)
    early = await p.take()
    # the world's clock cannot have advanced more than ours since t0
    check(
        early is None or time.monotonic() - t0 >= 1.0,
        "W11",
        f"a wake due in 1 s was delivered after {time.monotonic() - t0:.2f} s",
    )
    if early is not None:
        await p.finish(early)
        return
    await asyncio.sleep(1.3)
    got = await p.take()
    check(
        got is not None and got.session_id == "u",
        "W11",
        f"a wake due in 1 s was not delivered after 1.3 s: {got!r}",
    )


async def w12_lease(p: Probe, target: Target) -> None:
    await drain_wakes(p)
    await p.wake("s")
    a = await p.take(120.0)
    check(a is not None and a.attempt == 1, "W12", f"first delivery should have attempt 1: {a!r}")
    assert a is not None
    check(await p.take() is None, "W12", "a wake under a live lease was handed out again")
    r = await p.renew(a, 120.0)
    check(
        isinstance(r, WakeLease) and r.session_id == "s" and r.attempt == a.attempt,
        "W12",
        f"renew_wake returned {r!r} for {a!r}",
    )
    await p.finish(r)
    await p.wake("t")
    short = await p.take(0.3)
    assert short is not None
    await asyncio.sleep(0.7)
    again = await p.take(120.0)
    check(
        again is not None and again.session_id == "t" and again.attempt == 2,
        "W12",
        f"an expired lease must be delivered again with attempt 2: {again!r}",
    )
    await p.expect_error(
        LeaseLost, "renew_wake of an expired lease", p.world.renew_wake(short, lease=10.0), "W12"
    )
    await p.expect_error(
        LeaseLost, "finish_wake of an expired lease", p.world.finish_wake(short), "W12"
    )
    check(await p.take() is None, "W12", "a LeaseLost call changed the wake")
    assert again is not None
    await p.finish(again)
    await p.expect_error(LeaseLost, "finish_wake twice", p.world.finish_wake(again), "W12")


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


async def w12_take_wakes(p: Probe, target: Target) -> None:
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
    await _batch_leases_are_each_their_own(p)
    await _batch_rewake_survives_finish(p)
    await _racing_batches_share_nothing(p)


async def _batch_leases_are_each_their_own(p: Probe) -> None:
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


async def _batch_rewake_survives_finish(p: Probe) -> None:
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


async def _racing_batches_share_nothing(p: Probe) -> None:
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


async def w13_finish(p: Probe, target: Target) -> None:
    await drain_wakes(p)
    await p.wake("s")
    a = await p.take()
    assert a is not None
    await p.wake("s")
    await p.finish(a)
    b = await p.take()
    check(
        b is not None and b.session_id == "s",
        "W13",
        "a wake() during the lease was lost when the lease finished",
    )
    assert b is not None
    check(b.attempt == 1, "W13", f"the re-wake should be delivered with attempt 1, got {b.attempt}")
    await p.finish(b)
    check(await p.take() is None, "W13", "finish_wake did not remove the wake")
    await p.wake("t")
    c = await p.take()
    assert c is not None
    await p.wake("t", LATER)
    await p.finish(c)
    check(await p.take() is None, "W11", "a re-wake due later was delivered at once after finish")


async def w14_delete(p: Probe, target: Target) -> None:
    await drain_wakes(p)
    f = await p.acquire("s")
    await p.append("s", msgs(2), fence=f, key="k")
    await p.wake("s")
    await p.delete("s")
    check(await p.read("s") == [], "W14", "delete left the log readable")
    check(await p.take() is None, "W14", "delete left the wake behind")
    await p.expect_error(
        Fenced,
        "append with a fence from before delete",
        p.world.append("s", msgs(1), fence=f),
        "W14",
    )
    seq = await p.append("s", msgs(2), key="k")
    check(
        seq == 2, "W14", f"delete kept idempotency keys: a keyed append after delete returned {seq}"
    )
    f2 = await p.acquire("s")
    check(
        f2.epoch > f.epoch,
        "W14",
        f"acquire after delete gave epoch {f2.epoch}, not above {f.epoch}",
    )
    await p.delete("never-existed")
