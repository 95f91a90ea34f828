"""Scenarios of delete, and of the optional session listing (W14)."""

from __future__ import annotations

from typing import cast

from fxworld.errors import Fenced, LeaseLost
from fxworld.protocol import SessionLister
from fxworld_conformance.guarantees.probe import OTHER, Probe, S, check, e, msgs, no_wake
from fxworld_conformance.guarantees.scenario import Group

__all__ = ["SCENARIOS"]

SCENARIOS = Group()


@SCENARIOS("delete removes the log, its keys and its wake; other sessions stay")
async def w14_delete(p: Probe) -> None:
    f = await p.acquire(S)
    await p.append(S, msgs(2), fence=f, key="k", wake=0)
    await p.append(OTHER, [e(n=1)])
    await p.delete(S)
    check(await p.read(S) == [], "W14", "delete left the log readable")
    await no_wake(p)
    seq = await p.append(S, [e(n=2)], key="k")
    check(seq == 1, "W14", f"delete kept idempotency keys: a keyed append after it returned {seq}")
    check([x.data for x in await p.read_all(S)] == [{"n": 2}], "W14", "the log after delete")
    check([x.data for x in await p.read_all(OTHER)] == [{"n": 1}], "W14", "delete touched another")
    await p.delete("never-written")


@SCENARIOS("old fences are refused after delete", also=("W1",))
async def w14_old_fences_refused(p: Probe) -> None:
    w = p.world
    f = await p.acquire(S)
    await p.delete(S)
    await p.expect_error(
        Fenced, "append with a fence from before delete", w.append(S, [e()], fence=f)
    )
    check(await p.read(S) == [], "W14", "a refused append after delete landed")
    f2 = await p.acquire(S)
    check(
        f2.epoch > f.epoch and f2.seq == 1,
        "W14",
        f"acquire after delete gave {f2}, not an epoch above {f.epoch} at seq 1",
    )
    await p.expect_error(
        Fenced, "append with a fence from before delete", w.append(S, [e()], fence=f)
    )
    assert await p.append(S, [e()], fence=f2) == 2


@SCENARIOS("delete of a leased wake ends its lease", also=("W12",))
async def w14_delete_leased_wake(p: Probe) -> None:
    await p.wake(S)
    lease = await p.take(5)
    assert lease is not None
    await p.delete(S)
    await p.expect_error(LeaseLost, "finish_wake after delete", p.world.finish_wake(lease))
    await no_wake(p)


@SCENARIOS("a deleted session leaves the listing", needs=(SessionLister,))
async def w14_deleted_session_leaves_the_listing(p: Probe) -> None:
    lister = cast(SessionLister, p.world)
    await p.append(S, [e()])
    await p.append(OTHER, [e()])
    assert await lister.list_sessions() == [S, OTHER]
    await p.delete(S)
    listed = await lister.list_sessions()
    check(listed == [OTHER], "W14", f"after delete, list_sessions gave {listed}")


@SCENARIOS("list_sessions pages in ascending order", needs=(SessionLister,))
async def w14_list_sessions_pages(p: Probe) -> None:
    lister = cast(SessionLister, p.world)
    ids = ["b", "a", "c:1", "A", "z-9", "m.x"]
    for sid in ids:
        await p.append(sid, [e()])
    await p.acquire("fenced-only")
    await p.append("gone", [e()])
    await p.delete("gone")
    expected = sorted([*ids, "fenced-only"])
    assert await lister.list_sessions() == expected
    page1 = await lister.list_sessions(limit=3)
    page2 = await lister.list_sessions(after=page1[-1], limit=3)
    page3 = await lister.list_sessions(after=page2[-1], limit=3)
    assert page1 + page2 + page3 == expected
    assert await lister.list_sessions(after=expected[-1]) == []
