"""Scenarios of follow: the past then new entries, reconnects, concurrent writers,
cancelled consumers (W10)."""

from __future__ import annotations

import asyncio

from fxworld_conformance.guarantees.probe import LIVE, Probe, S, check, e, show
from fxworld_conformance.guarantees.scenario import Group
from fxworld_conformance.model import Violation

__all__ = ["SCENARIOS"]

SCENARIOS = Group()


@SCENARIOS("follow yields the past, then new entries, in order, once, as read() shows them")
async def w10_follow(p: Probe) -> None:
    await p.append(S, [e(n=1), e(n=2)])
    it = p.world.follow(S)
    got = [await asyncio.wait_for(anext(it), LIVE) for _ in range(2)]
    check([x.data["n"] for x in got] == [1, 2], "W10", f"follow yielded {show(got)}")
    nxt = asyncio.ensure_future(asyncio.wait_for(anext(it), 10.0))
    await asyncio.sleep(0.05)
    check(not nxt.done(), "W10", "follow yielded though nothing new was appended")
    await p.append(S, [e(n=3), e(n=4)])
    try:
        got.append(await nxt)
        got.append(await asyncio.wait_for(anext(it), LIVE))
    except TimeoutError:
        raise Violation(
            "W10", f"follow did not yield new entries within 10 s: {show(got)}"
        ) from None
    finally:
        await it.aclose()  # type: ignore[attr-defined]
    log = await p.read_all(S)
    check(
        [(x.seq, x.data) for x in got] == [(x.seq, x.data) for x in log],
        "W10",
        f"follow yielded {show(got)}, read() shows {show(log)}",
    )


@SCENARIOS("reconnecting from the last seq seen has no gap and no duplicate")
async def w10_reconnect(p: Probe) -> None:
    await p.append(S, [e(n=i) for i in range(1, 6)])
    seen: list[int] = []
    for _ in range(3):
        it = p.world.follow(S, seen[-1] if seen else 0)
        try:
            seen.append((await asyncio.wait_for(anext(it), LIVE)).seq)
            seen.append((await asyncio.wait_for(anext(it), LIVE)).seq)
        finally:
            await it.aclose()  # type: ignore[attr-defined]
        await p.append(S, [e()])
    check(seen == [1, 2, 3, 4, 5, 6], "W10", f"three followers in turn yielded seqs {seen}")


@SCENARIOS("follow sees concurrent writers without gaps")
async def w10_concurrent_writers(p: Probe) -> None:
    async def writer(w: int) -> None:
        for i in range(10):
            await p.append(S, [e(w=w, i=i), e(w=w, i=i)])
            await asyncio.sleep(0.001)

    async def follower() -> list[int]:
        seqs: list[int] = []
        async for entry in p.world.follow(S):
            seqs.append(entry.seq)
            if len(seqs) == 60:
                break
        return seqs

    task = asyncio.ensure_future(asyncio.wait_for(follower(), 30))
    await asyncio.gather(*(writer(w) for w in range(3)))
    seqs = await task
    check(seqs == list(range(1, 61)), "W10", f"follow yielded seqs {seqs}")


@SCENARIOS("follow stops when its consumer is cancelled as a new entry arrives")
async def w10_follow_cancelled(p: Probe) -> None:
    """A follower whose task is cancelled stops, even when the cancel arrives just as
    new entries wake it (a classic asyncio.wait_for trap on Python 3.11)."""
    for i in range(10):

        async def consume(after: int) -> None:
            async for _ in p.world.follow(S, after):
                pass

        last = await p.append(S, [e(i=i)])
        # half wait at the end of the log, half far past it (woken, nothing to yield)
        task = asyncio.ensure_future(consume(last if i % 2 else last + 10**6))
        # let the follower reach its wait for new entries (or be on its way there)
        await asyncio.sleep((0.0, 0.05, 0.01)[i % 3])
        # the append awaited directly (no wrapper task), so the cancel below lands in
        # the same loop iteration as the change signal
        p.operations += 1
        await p.world.append(S, [e(wake=i)])
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=3.0)
        if not done:
            for _ in range(50):  # do not leave it running
                task.cancel()
                done, _ = await asyncio.wait({task}, timeout=0.1)
                if done:
                    break
            raise Violation(
                "W10",
                f"a follow() consumer cancelled as a new entry arrived kept running for 3 s "
                f"(attempt {i + 1}): the cancel was swallowed while it read or waited for "
                "new entries (e.g. by asyncio.wait_for on Python 3.11, or a worker-thread "
                "call that outlives its caller's cancel)",
            )
