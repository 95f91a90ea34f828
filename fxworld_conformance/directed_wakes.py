"""Directed checks of wakes and delete: coalescing and due times, leases, finish,
delete (W11-W14)."""

from __future__ import annotations

import asyncio
import time

from fxworld.errors import Fenced, LeaseLost
from fxworld.types import WakeLease
from fxworld_conformance.directed_probe import Probe, check, drain_wakes, msgs
from fxworld_conformance.model import Violation
from fxworld_conformance.target import Target

__all__ = ["w11_coalesce", "w12_lease", "w13_finish", "w14_delete"]


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
