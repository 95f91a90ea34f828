"""Scenarios of bad input: every bad value is refused with a typed error and
leaves stored data and wakes untouched (W15)."""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Any

from fxworld.errors import (
    Conflict,
    EntryTooLarge,
    Fenced,
    InvalidArgument,
    InvalidEntry,
    InvalidSessionId,
)
from fxworld.types import NewEntry, WakeLease
from fxworld.validate import DEFAULT_MAX_ENTRY_BYTES, MAX_SECONDS, MAX_SEQ
from fxworld_conformance.bad_values import (
    BAD_AFTERS,
    BAD_DELAYS,
    BAD_ENTRY_LISTS,
    BAD_EXPECTS,
    BAD_KEYS,
    BAD_KINDS,
    BAD_LEASES,
    BAD_LIMITS,
    BAD_SESSION_IDS,
    GOOD_SESSION_IDS,
    NON_JSON_DATA,
    NON_OBJECT_DATA,
    RESERVED_KINDS,
)
from fxworld_conformance.guarantees.probe import (
    OTHER,
    Probe,
    S,
    check,
    e,
    follow_first,
    no_wake,
    seed,
    snapshot,
)
from fxworld_conformance.guarantees.scenario import Group

__all__ = ["SCENARIOS"]

SCENARIOS = Group()


async def unchanged(p: Probe, before: tuple[object, ...]) -> None:
    """Nothing was written and no wake enqueued since ``before`` (a snapshot)."""
    check(await snapshot(p) == before, "W15", "a refused call changed stored data")
    await no_wake(p)


async def all_refused(
    p: Probe, err: type[Exception], calls: list[tuple[str, Awaitable[Any]]]
) -> None:
    """Each call raises ``err``; calls a failure leaves unawaited are closed."""
    try:
        for what, call in calls:
            await p.expect_error(err, what, call)
    finally:
        for _, call in calls:
            close = getattr(call, "close", None)
            if close is not None:
                close()


@SCENARIOS("bad session ids are refused by every call; the edges of good ones work")
async def w15_session_ids(p: Probe) -> None:
    w = p.world
    _, before = await seed(p)
    for bad in BAD_SESSION_IDS.values():
        lease = WakeLease(bad, "t", 1, datetime.now(UTC))
        calls: list[tuple[str, Awaitable[object]]] = [
            ("acquire", w.acquire(bad)),
            ("append", w.append(bad, [e()], key="k", wake=0)),
            ("read", w.read(bad)),
            ("wake", w.wake(bad)),
            ("delete", w.delete(bad)),
            ("follow", follow_first(w, bad)),
            ("renew_wake", w.renew_wake(lease, lease=5)),
            ("finish_wake", w.finish_wake(lease)),
        ]
        await all_refused(p, InvalidSessionId, [(f"{n}({bad!r})", c) for n, c in calls])
    await unchanged(p, before)
    for sid in GOOD_SESSION_IDS:
        check(await p.append(sid, [e()]) == 1, "W15", f"append({sid!r}) was refused")


@SCENARIOS("reserved or bad kinds are refused")
async def w15_kinds(p: Probe) -> None:
    _, before = await seed(p)
    for kind in [*RESERVED_KINDS, *BAD_KINDS.values()]:
        call = p.world.append(S, [NewEntry(kind, {"x": 1})], key="new", wake=0)
        await p.expect_error(InvalidEntry, f"append of kind {kind!r}", call)
    await unchanged(p, before)


@SCENARIOS("data that is not a JSON object is refused, the whole batch with it")
async def w15_data(p: Probe) -> None:
    w = p.world
    fence, before = await seed(p)
    for data in NON_OBJECT_DATA:
        call = w.append(S, [NewEntry("msg", data)], key="new", wake=0)
        await p.expect_error(InvalidEntry, f"append of data {data!r}", call)
    for name, data in NON_JSON_DATA.items():
        call = w.append(S, [e(ok=1), NewEntry("msg", data)], fence=fence, wake=0)
        await p.expect_error(InvalidEntry, f"append of {name} data", call)
    await unchanged(p, before)


@SCENARIOS("bad lists of entries are refused")
async def w15_entry_lists(p: Probe) -> None:
    _, before = await seed(p)
    for entries in BAD_ENTRY_LISTS:
        await p.expect_error(
            InvalidEntry, f"append({entries!r})", p.world.append(S, entries, wake=0)
        )
    await unchanged(p, before)


@SCENARIOS("an entry over the size limit is EntryTooLarge; one that just fits lands")
async def w15_oversized(p: Probe) -> None:
    w = p.world
    fence, before = await seed(p)
    limit = int(getattr(w, "max_entry_bytes", DEFAULT_MAX_ENTRY_BYTES))
    overhead = len('{"x":""}')
    just_fits = NewEntry("big", {"x": "a" * (limit - overhead)})
    too_big = NewEntry("big", {"x": "a" * (limit - overhead + 1)})
    err = await p.expect_error(
        EntryTooLarge,
        f"append of an entry of {limit + 1} bytes",
        w.append(S, [e(), too_big], fence=fence, key="big", wake=0),
    )
    check(
        (err.limit, err.size) == (limit, limit + 1),
        "W15",
        f"EntryTooLarge carries limit={err.limit}, size={err.size}; expected {limit}, {limit + 1}",
    )
    check(isinstance(err, InvalidEntry) and isinstance(err, ValueError), "W16", f"{err!r}")
    # multi-byte characters count as their UTF-8 size
    wide = [NewEntry("big", {"x": "é" * (limit // 2)})]
    await p.expect_error(
        EntryTooLarge, "append of wide characters over the limit", w.append(S, wide)
    )
    await unchanged(p, before)
    seq = await p.append(S, [just_fits], fence=fence)
    check((await p.read(S, seq - 1))[0].data == just_fits.data, "W15", "an entry that fits")


@SCENARIOS("bad expect, key, fence, limit, cursor, delay or lease values are refused")
async def w15_arguments(p: Probe) -> None:
    w = p.world
    await seed(p)
    other = await p.acquire(OTHER)
    before = await snapshot(p)
    bad: list[tuple[str, Awaitable[Any]]] = []
    bad += [(f"append(expect={x!r})", w.append(S, [e()], expect=x, wake=0)) for x in BAD_EXPECTS]
    bad += [(f"append(key={k})", w.append(S, [e()], key=x, wake=0)) for k, x in BAD_KEYS.items()]
    bad += [(f"read(limit={x!r})", w.read(S, 0, limit=x)) for x in BAD_LIMITS]
    bad += [(f"read(after={x!r})", w.read(S, x)) for x in BAD_AFTERS]
    bad += [(f"follow(after={x!r})", follow_first(w, S, x)) for x in BAD_AFTERS]
    bad += [(f"wake(delay={x!r})", w.wake(S, delay=x)) for x in BAD_DELAYS]
    bad += [(f"append(wake={x!r})", w.append(S, [e()], wake=x)) for x in BAD_DELAYS]
    bad.append(("append(fence=a tuple)", w.append(S, [e()], fence=(S, 1, 1), wake=0)))  # type: ignore[arg-type]
    bad.append(("finish_wake('s')", w.finish_wake("s")))  # type: ignore[arg-type]
    await all_refused(p, InvalidArgument, bad)
    # a fence of another session is never the newest of this one (W2)
    call = w.append(S, [e()], fence=other)
    await p.expect_error(Fenced, "append(fence of another session)", call, "W2")
    await unchanged(p, before)


@SCENARIOS("a bad lease is refused by take_wake and renew_wake, taking nothing")
async def w15_leases(p: Probe) -> None:
    _, before = await seed(p)
    await p.wake(S)
    for lease in BAD_LEASES:
        await p.expect_error(
            InvalidArgument, f"take_wake(lease={lease!r})", p.world.take_wake(lease=lease)
        )
    held = await p.take(5)
    check(held is not None and held.attempt == 1, "W15", f"a bad take_wake took the wake: {held}")
    assert held is not None
    for lease in BAD_LEASES:
        await p.expect_error(
            InvalidArgument, f"renew_wake(lease={lease!r})", p.world.renew_wake(held, lease=lease)
        )
    await p.finish(held)  # the bad renews changed nothing
    await unchanged(p, before)


@SCENARIOS("the largest allowed values work, stored as the backend's own types")
async def w15_largest_values(p: Probe) -> None:
    w = p.world
    await seed(p)
    assert await p.read(S, MAX_SEQ) == []
    assert len(await p.read(S, 0, MAX_SEQ)) == 4
    call = w.append(S, [e()], expect=MAX_SEQ)
    await p.expect_error(Conflict, "append(expect=MAX_SEQ)", call, "W5")
    await p.wake(S, MAX_SECONDS)
    await no_wake(p, "W11")  # due in a hundred years
    await p.wake(OTHER)
    lease = await p.take(MAX_SECONDS)
    check(lease is not None and lease.session_id == OTHER, "W15", f"take_wake gave {lease}")
    assert lease is not None
    assert lease.expires_at.year >= datetime.now(UTC).year + 99, lease
    lease = await p.renew(lease, MAX_SECONDS)
    await p.finish(lease)
    await no_wake(p)
