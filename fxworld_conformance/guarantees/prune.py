"""The optional capabilities retention needs: ``last_entry``
(:class:`fxworld.protocol.LastEntryReader`) and ``delete_if_idle``
(:class:`fxworld.protocol.IdleDeleter`). A world without one skips its checks.

Both keep W14 (delete) and W15 (bad input) for what they add."""

from __future__ import annotations

from typing import Any, cast

from fxworld.errors import Fenced, InvalidArgument, InvalidSessionId, LeaseLost
from fxworld.protocol import IdleDeleter, LastEntryReader, SessionLister
from fxworld_conformance.guarantees.probe import LATER, OTHER, Probe, S, check, e, no_wake, view
from fxworld_conformance.guarantees.scenario import Group

__all__ = ["SCENARIOS"]

SCENARIOS = Group()


@SCENARIOS("last_entry is the end of the log", needs=(LastEntryReader,))
async def w9_last_entry(p: Probe) -> None:
    world = p.world
    reader = cast(LastEntryReader, world)
    assert await reader.last_entry(S) is None
    f = await p.acquire(S)
    await p.append(S, [e(n=1), e(n=2)], fence=f)
    last = await reader.last_entry(S)
    assert last is not None and view([last]) == view((await p.all_entries(S))[-1:])
    assert last.seq == 3 and last.data == {"n": 2} and last.epoch == f.epoch
    assert last.at == (await world.read(S, 2))[0].at
    await p.delete(S)
    assert await reader.last_entry(S) is None
    await p.expect_error(InvalidSessionId, "last_entry('bad id')", reader.last_entry("bad id"))


@SCENARIOS("delete_if_idle deletes an idle session whole", needs=(IdleDeleter,))
async def w14_delete_if_idle_deletes_whole(p: Probe) -> None:
    world = p.world
    deleter = cast(IdleDeleter, world)
    f = await p.acquire(S)
    await p.append(S, [e(n=1)], fence=f, key="k")
    await p.append(OTHER, [e(n=1)])
    assert await deleter.delete_if_idle(S, last=2) is True
    p.acked.pop(S)
    assert await world.read(S) == []
    await p.expect_error(Fenced, "append(fence from before)", world.append(S, [e()], fence=f))
    assert await p.append(S, [e(n=2)], key="k") == 1  # the key went too
    assert [x.data for x in await p.read_all(OTHER)] == [{"n": 1}]
    if isinstance(world, SessionLister):
        assert await world.list_sessions() == [S, OTHER]
        assert await deleter.delete_if_idle(S, last=1) is True
        p.acked.pop(S)
        assert await world.list_sessions() == [OTHER]
    assert await deleter.delete_if_idle("never-written", last=1) is False


@SCENARIOS("delete_if_idle refuses when an append came since", needs=(IdleDeleter,))
async def w14_delete_if_idle_refuses_after_an_append(p: Probe) -> None:
    world = p.world
    deleter = cast(IdleDeleter, world)
    await p.append(S, [e(n=1)])
    looked = 1  # "idle since seq 1" ... then a prompt arrives before the delete
    await p.append(S, [e("prompt", text="still there?")])
    assert await deleter.delete_if_idle(S, last=looked) is False
    assert [x.data for x in await p.read_all(S)] == [{"n": 1}, {"text": "still there?"}]
    await p.acquire(S)  # a takeover is an append too
    assert await deleter.delete_if_idle(S, last=2) is False
    assert len(await p.read_all(S)) == 3


@SCENARIOS("delete_if_idle keeps a session with a pending wake", needs=(IdleDeleter,))
async def w14_delete_if_idle_keeps_a_pending_wake(p: Probe) -> None:
    world = p.world
    deleter = cast(IdleDeleter, world)
    await p.append(S, [e(n=1)])
    await p.wake(S, LATER)  # due in an hour: pending all the same
    assert await deleter.delete_if_idle(S, last=1) is False
    await p.append(OTHER, [e(n=1)])
    await world.wake(OTHER)
    lease = await world.take_wake(lease=30)
    check(lease is not None and lease.session_id == OTHER, "W11", f"take_wake gave {lease}")
    assert lease is not None
    assert await deleter.delete_if_idle(OTHER, last=1) is False  # leased: running
    await world.finish_wake(lease)
    assert await deleter.delete_if_idle(OTHER, last=1) is True
    p.acked.pop(OTHER)
    await p.expect_error(LeaseLost, "finish_wake(lease)", world.finish_wake(lease))
    assert [x.data for x in await p.read_all(S)] == [{"n": 1}]
    await no_wake(p, "W11")  # S's wake is not due yet, and OTHER's went with it


@SCENARIOS("delete_if_idle refuses bad input before any I/O", needs=(IdleDeleter,))
async def w15_delete_if_idle_bad_input(p: Probe) -> None:
    world = p.world
    deleter = cast(IdleDeleter, world)
    await p.append(S, [e(n=1)])
    bad: Any
    for bad in [0, -1, 1.0, "1", True, None, 2**64]:
        await p.expect_error(
            InvalidArgument, f"delete_if_idle(last={bad!r})", deleter.delete_if_idle(S, last=bad)
        )
    await p.expect_error(
        InvalidSessionId,
        "delete_if_idle('bad id', last=1)",
        deleter.delete_if_idle("bad id", last=1),
    )
    assert [x.data for x in await p.read_all(S)] == [{"n": 1}]
