"""Scenarios of the log: acquire and fences, appends, batches, expect, keys,
epochs and reads (W1-W9)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from fxworld.errors import Conflict, Fenced, InvalidEntry
from fxworld.types import Fence, NewEntry
from fxworld_conformance.bad_values import RESERVED_KINDS
from fxworld_conformance.guarantees.probe import (
    LIVE,
    OTHER,
    Probe,
    S,
    check,
    e,
    epochs_monotone,
    msgs,
    no_wake,
    seed,
    show,
    snapshot,
    view,
)
from fxworld_conformance.guarantees.scenario import Group

__all__ = ["SCENARIOS", "JSON_SAMPLES"]

SCENARIOS = Group()

# -- W1 acquire ----------------------------------------------------------------------


@SCENARIOS("acquire: epochs grow, fence entries, also across delete", also=("W14",))
async def w1_acquire(p: Probe) -> None:
    await p.append("s", [e("prompt", text="hi")])
    f1 = await p.acquire("s")
    await p.append("s", msgs(1), fence=f1)
    f2 = await p.acquire("s")
    check(isinstance(f1, Fence) and f1.session_id == "s", "W1", f"acquire returned {f1!r}")
    check(f2.epoch > f1.epoch >= 1, "W1", f"second acquire epoch {f2.epoch} not above {f1.epoch}")
    log = await p.read_all("s")
    check([x.kind for x in log] == ["prompt", "fence", "message", "fence"], "W1", show(log))
    for f in (f1, f2):
        x = log[f.seq - 1]
        check(
            x.kind == "fence" and x.data == {"epoch": f.epoch} and x.epoch == f.epoch,
            "W1",
            f"fence entry for {f!r} is {x!r}",
        )
    await p.delete("s")
    f3 = await p.acquire("s")
    check(
        f3.epoch > f2.epoch, "W1", f"acquire after delete: epoch {f3.epoch}, not above {f2.epoch}"
    )
    check(f3.seq == 1, "W1", f"first fence after delete landed at seq {f3.seq}, not 1")


@SCENARIOS("acquire makes every older fence stale at once, without waiting")
async def w1_older_fences_stale_at_once(p: Probe) -> None:
    w = p.world
    f1 = await w.acquire(S)
    f2 = await asyncio.wait_for(w.acquire(S), LIVE)  # the previous holder never released
    await p.expect_error(Fenced, "append with the older fence", w.append(S, [e()], fence=f1), "W2")
    assert await w.append(S, [e()], fence=f2) == f2.seq + 1


@SCENARIOS("racing acquires get distinct epochs, growing along the log", also=("W8",))
async def w1_racing_acquires(p: Probe) -> None:
    w = p.world
    fences = await asyncio.gather(*(p.acquire(S) for _ in range(12)))
    epochs = [f.epoch for f in fences]
    check(len(set(epochs)) == 12, "W1", f"12 concurrent acquires returned epochs {epochs}")
    log = await p.read_all(S)
    assert [x.kind for x in log] == ["fence"] * 12
    logged = [x.epoch for x in log]
    check(logged == sorted(logged), "W1", f"epochs are not increasing along the log: {logged}")  # type: ignore[type-var]
    newest = max(fences, key=lambda f: f.epoch)
    for f in fences:
        if f is not newest:
            await p.expect_error(
                Fenced, "append with a raced fence", w.append(S, [e()], fence=f), "W2"
            )
    await w.append(S, [e()], fence=newest)


@SCENARIOS("epochs are per session")
async def w1_epochs_per_session(p: Probe) -> None:
    await p.acquire(S)
    await p.acquire(S)
    f_other = await p.acquire(OTHER)
    assert f_other.seq == 1
    await p.append(OTHER, [e()], fence=f_other)


@SCENARIOS("kinds starting with 'fence' are reserved, alone or in a batch", also=("W4",))
async def w1_fence_kinds_reserved(p: Probe) -> None:
    await p.append(S, [e()])
    for kind in RESERVED_KINDS:
        for entries in ([NewEntry(kind, {"epoch": 99})], [e("a"), NewEntry(kind, {})]):
            await p.expect_error(
                InvalidEntry, f"append of reserved kind {kind!r}", p.world.append(S, entries)
            )
    assert [x.kind for x in await p.read_all(S)] == ["msg"]


# -- W2 fenced append ----------------------------------------------------------------


@SCENARIOS("fenced append: a replaced writer stays refused, every time, writing nothing")
async def w2_fenced_append(p: Probe) -> None:
    w = p.world
    old = await p.acquire(S)
    s1 = await p.append(S, msgs(1), fence=old)
    new = await p.acquire(S)
    before = view(await p.read_all(S))
    for attempt in range(3):
        err = await p.expect_error(
            Fenced,
            f"append with the replaced fence (attempt {attempt + 1})",
            w.append(S, msgs(2, "stale"), fence=old, wake=0),
        )
        check(
            err.session_id == S and err.epoch == old.epoch and err.current in (None, new.epoch),
            "W16",
            f"Fenced carries {vars(err)}",
        )
    check(view(await p.read_all(S)) == before, "W2", "a refused append left a trace")
    await no_wake(p)
    s2 = await p.append(S, msgs(1, "new"), fence=new)
    await p.expect_error(  # still out after its successor wrote
        Fenced, "append with the replaced fence", w.append(S, msgs(1, "stale"), fence=old)
    )
    log = await p.read_all(S)
    check(
        [x.seq for x in log] == [1, 2, 3, 4] and s1 == 2 and s2 == 4,
        "W2",
        f"a refused append left a trace or positions moved: {show(log)}",
    )
    check(
        log[3].epoch == new.epoch and log[1].epoch == old.epoch,
        "W2",
        f"fenced entries carry the wrong epoch: {show(log)}",
    )


@SCENARIOS("a fence never handed out is refused")
async def w2_fence_never_handed_out(p: Probe) -> None:
    w = p.world
    for made_up in (Fence(S, 0, 0), Fence(S, 1, 1)):
        await p.expect_error(Fenced, f"append({made_up})", w.append(S, [e()], fence=made_up))
    f = await p.acquire(S)
    forged = Fence(S, f.epoch + 1, f.seq)
    await p.expect_error(Fenced, f"append({forged})", w.append(S, [e()], fence=forged))
    assert [x.kind for x in await p.read_all(S)] == ["fence"]


# -- W3 unfenced append --------------------------------------------------------------


@SCENARIOS("unfenced appends land between fenced ones, disturbing no fence")
async def w3_unfenced(p: Probe) -> None:
    assert await p.append(S, [e("prompt", n=0)]) == 1
    f = await p.acquire(S)
    await p.append(S, [e(n=1)], fence=f)
    await p.append(S, [e("prompt", n=2)])
    await p.append(S, [e(n=3)], fence=f)  # the prompt did not disturb the fence
    f2 = await p.acquire(S)
    await p.append(S, [e("prompt", n=4)])  # nor does a takeover refuse prompts
    log = await p.read_all(S)
    check(
        [(x.kind, x.epoch) for x in log]
        == [
            ("prompt", None),
            ("fence", f.epoch),
            ("msg", f.epoch),
            ("prompt", None),
            ("msg", f.epoch),
            ("fence", f2.epoch),
            ("prompt", None),
        ],
        "W3",
        f"unfenced entries must have epoch None, fenced ones their fence's: {show(log)}",
    )


# -- W4 atomic, dense, ordered -------------------------------------------------------

JSON_SAMPLES: list[dict[str, Any]] = [
    {},
    {"text": "héllo wörld ✓ 日本語 🙂", "nul": "a\u0000b", "quote": "\"'\\"},
    {"n": 0, "neg": -7, "big": 2**53 + 1, "f": 0.1, "tiny": 1e-300, "huge": 1.5e300},
    {"nested": {"list": [1, [2, [3, {"k": None}]]], "t": True, "f": False}},
    {"": "empty key", "ключ": "значение", "a.b": [1, "2", 3.5]},
]


@SCENARIOS("a batch lands at consecutive positions and returns its last seq")
async def w4_dense_batches(p: Probe) -> None:
    assert await p.append(S, [e(n=i) for i in range(3)]) == 3
    assert await p.append(S, [e(n=3)]) == 4
    assert await p.append(S, [e(n=i) for i in range(4, 9)]) == 9
    log = await p.read_all(S)
    assert [x.data["n"] for x in log] == list(range(9))
    assert all(x.session_id == S for x in log)
    big = [NewEntry("message", {"i": i}) for i in range(300)]
    check(
        await p.append("big", big) == 300 and len(await p.read_all("big")) == 300,
        "W4",
        "a batch of 300 entries did not land whole",
    )


@SCENARIOS("stored data is exactly what was given (JSON round trip, aware times)")
async def w4_round_trip(p: Probe) -> None:
    seq = await p.append(S, [NewEntry("k" * 64, d) for d in JSON_SAMPLES])
    check(seq == len(JSON_SAMPLES), "W4", f"a batch of {len(JSON_SAMPLES)} returned {seq}")
    log = await p.read_all(S)
    for x, d in zip(log, JSON_SAMPLES, strict=True):
        check(x.data == d, "W4", f"entry {x.seq} changed: wrote {d!r}, read {x.data!r}")
        check(x.kind == "k" * 64, "W4", f"entry {x.seq} kind changed: {x.kind!r}")
        check(
            isinstance(x.at, datetime) and x.at.utcoffset() is not None,
            "W4",
            f"entry {x.seq} time {x.at!r} is not timezone-aware",
        )
        check(abs((datetime.now(UTC) - x.at).total_seconds()) < 60, "W4", f"{x.at} is not now")
    # changing what we gave or what we got never changes what is stored
    given = {"list": [1, 2], "nested": {"a": "b"}}
    await p.append(OTHER, [NewEntry("k", given)])
    given["list"].append(3)  # type: ignore[attr-defined]
    (await p.read(OTHER))[0].data["nested"]["a"] = "changed"
    got = (await p.read(OTHER))[0].data
    check(got == {"list": [1, 2], "nested": {"a": "b"}}, "W4", f"stored data changed: {got}")


@SCENARIOS("concurrent batches never interleave (20 writers on one session)")
async def w4_concurrent_batches(p: Probe) -> None:
    async def batch(b: int) -> int:
        return await p.append(S, [e(b=b, i=i) for i in range(5)])

    lasts = await asyncio.gather(*(batch(b) for b in range(20)))
    log = await p.read_all(S)
    check([x.seq for x in log] == list(range(1, 101)), "W4", f"positions: {show(log)}")
    for b, last in enumerate(lasts):
        chunk = log[last - 5 : last]
        check(
            [(x.data["b"], x.data["i"]) for x in chunk] == [(b, i) for i in range(5)],
            "W4",
            f"batch of writer {b} (returned seq {last}) is torn or interleaved: {show(chunk)}",
        )


@SCENARIOS("a batch with one bad entry writes nothing", also=("W15",))
async def w4_bad_entry_writes_nothing(p: Probe) -> None:
    w = p.world
    _, before = await seed(p)
    bad = [e(n=1), NewEntry("bad", {"x": float("nan")})]
    await p.expect_error(InvalidEntry, "append(a NaN in a batch)", w.append(S, bad, wake=0))
    await p.expect_error(
        InvalidEntry, "append(fence kind)", w.append(S, [e(n=1), NewEntry("fence", {})])
    )
    check(await snapshot(p) == before, "W4", "a refused batch left a trace")
    await no_wake(p)


# -- W5 expect -----------------------------------------------------------------------


@SCENARIOS("a wrong expect is a Conflict with .last; nothing is written, no wake")
async def w5_expect(p: Probe) -> None:
    w = p.world
    check(await p.append(S, [e(n=1)], expect=0) == 1, "W5", "expect=0 on an empty log")
    check(await p.append(S, [e(n=2), e(n=3)], expect=1) == 3, "W5", "expect=1 on a log at 1")
    for wrong in (0, 2, 4, 100):
        err = await p.expect_error(
            Conflict,
            f"append(expect={wrong}) on a log at 3",
            w.append(S, [e(n=9)], expect=wrong, wake=0),
        )
        check(
            (err.last, err.expected, err.session_id) == (3, wrong, S),
            "W5",
            f"Conflict carries last={err.last}, expected={err.expected}, "
            f"session_id={err.session_id!r}; the log's last seq is 3",
        )
    check([x.data["n"] for x in await p.read_all(S)] == [1, 2, 3], "W5", "a Conflict wrote")
    await no_wake(p)


@SCENARIOS("expect with a fence: the fence is checked first")
async def w5_expect_with_a_fence(p: Probe) -> None:
    w = p.world
    f = await p.acquire(S)
    err = await p.expect_error(Conflict, "append(expect=0)", w.append(S, [e()], fence=f, expect=0))
    assert err.last == 1
    assert await p.append(S, [e()], fence=f, expect=1) == 2
    await p.acquire(S)
    await p.expect_error(
        Fenced, "stale append(expect=0)", w.append(S, [e()], fence=f, expect=0), "W2"
    )


@SCENARIOS("racing expects let exactly one win")
async def w5_racing_expects(p: Probe) -> None:
    w = p.world
    await p.append(S, [e()])
    results = await asyncio.gather(
        *(w.append(S, [e(w=i)], expect=1) for i in range(8)), return_exceptions=True
    )
    wins = [r for r in results if isinstance(r, int)]
    check(wins == [2], "W5", f"8 appends racing with expect=1 returned {results}")
    assert all(isinstance(r, Conflict) for r in results if not isinstance(r, int)), results
    assert len(await p.read_all(S)) == 2


# -- W6 idempotency key --------------------------------------------------------------


@SCENARIOS("a repeated key returns the first seq and writes nothing, stale fence or not")
async def w6_key(p: Probe) -> None:
    f1 = await p.acquire(S)
    batch = [e("prompt", text="once"), e("prompt", text="twice?")]
    s1 = await p.append(S, batch, key="k1", fence=f1)
    await p.append(S, [e(n=3)])
    again = await p.append(S, [e(n=99)], key="k1", fence=f1)
    check(again == s1, "W6", f"a keyed repeat returned {again}, the first call {s1}")
    await p.acquire(S)
    stale = await p.append(S, batch, key="k1", fence=f1)
    check(stale == s1, "W6", f"a keyed repeat with a now-stale fence returned {stale}, not {s1}")
    wrong = await p.append(S, batch, key="k1", expect=0)
    check(wrong == s1, "W6", f"a keyed repeat with a wrong expect returned {wrong}, not {s1}")
    log = await p.read_all(S)
    check(len(log) == 5, "W6", f"repeats wrote entries: {show(log)}")
    w = p.world
    await p.expect_error(  # a new key with the stale fence is refused
        Fenced, "append(new key, stale fence)", w.append(S, [e()], fence=f1, key="k2"), "W2"
    )
    await p.expect_error(
        Conflict, "append(new key, expect=0)", w.append(S, [e()], key="k3", expect=0), "W5"
    )
    # refused calls did not record their keys
    check(await p.append(S, [e()], key="k3") == 6, "W6", "a refused call recorded its key")


@SCENARIOS("keys are per session")
async def w6_keys_per_session(p: Probe) -> None:
    assert await p.append(S, [e()], key="k") == 1
    other = await p.append(OTHER, [e(), e()], key="k")
    check(other == 2, "W6", f"the same key in another session must land there; returned {other}")
    assert len(await p.read_all(OTHER)) == 2


@SCENARIOS("concurrent retries with one key land once")
async def w6_racing_retries(p: Probe) -> None:
    racers = await asyncio.gather(*(p.append(S, [e(n=1), e(n=2)], key="r") for _ in range(10)))
    check(set(racers) == {2}, "W6", f"10 concurrent calls with one key returned {racers}")
    check(
        len(await p.read_all(S)) == 2, "W6", "concurrent calls with one key landed more than once"
    )


@SCENARIOS("a keyed repeat owes no wake", also=("W7",))
async def w6_keyed_repeat_owes_no_wake(p: Probe) -> None:
    await p.append(S, [e()], key="p", wake=0)
    lease = await p.take(5)
    check(lease is not None and lease.session_id == S, "W7", f"append(wake=0) gave {lease}")
    assert lease is not None
    await p.finish(lease)
    await p.append(S, [e()], key="p", wake=0)
    await no_wake(p)


# -- W8 epoch-monotone log -----------------------------------------------------------


@SCENARIOS("a replaced writer never lands after its successor", also=("W2",))
async def w8_epochs(p: Probe) -> None:
    w = p.world
    writers = [await p.acquire(S)]
    await p.append(S, [e(w=0)], fence=writers[0])
    for i in range(1, 5):
        writers.append(await p.acquire(S))
        await p.append(S, [e("prompt")])
        for old in writers[:-1]:
            await p.expect_error(
                Fenced, "append with a replaced fence", w.append(S, [e(w=-1)], fence=old), "W2"
            )
        await p.append(S, [e(w=i), e(w=i)], fence=writers[-1])
    log = await p.read_all(S)
    check(epochs_monotone(log), "W8", f"epochs decrease along the log: {show(log)}")
    check(all(x.data.get("w") != -1 for x in log), "W2", f"a refused append landed: {show(log)}")


@SCENARIOS("racing writers keep the log epoch-monotone")
async def w8_racing_writers(p: Probe) -> None:
    async def writer(i: int) -> None:
        for _ in range(4):
            f = await p.acquire(S)
            for j in range(3):
                try:
                    await p.world.append(S, [e(w=i, i=j)], fence=f)
                except Fenced:
                    break
                await asyncio.sleep(0)

    await asyncio.gather(*(writer(i) for i in range(4)))
    log = await p.read_all(S)
    check(epochs_monotone(log), "W8", f"epochs decrease along the log: {show(log)}")


# -- W9 read -------------------------------------------------------------------------


@SCENARIOS("paged reads: a contiguous slice after the cursor, 1,000 by default")
async def w9_read(p: Probe) -> None:
    check(await p.read("never-written") == [], "W9", "an unknown session must read as empty")
    await p.append(S, [e(i=i) for i in range(1005)])
    page = await p.world.read(S)
    check(
        [x.seq for x in page] == list(range(1, 1001)),
        "W9",
        f"read() without a limit gave {len(page)} entries, not the first 1,000",
    )
    for after, limit, want in ((3, 4, [4, 5, 6, 7]), (1000, 10, list(range(1001, 1006)))):
        got = [x.seq for x in await p.read(S, after, limit)]
        check(got == want, "W9", f"read(after={after}, limit={limit}) gave {got}")
    check(await p.read(S, 1005) == [], "W9", "read past the end must be empty")
    check(await p.read(S, 5000) == [], "W9", "read far past the end must be empty")


@SCENARIOS("readers racing writers never see a hole or go backwards")
async def w9_readers_racing_writers(p: Probe) -> None:
    done = False
    seen_problems: list[str] = []

    async def writer() -> None:
        nonlocal done
        for b in range(30):
            await p.append(S, [e(b=b, i=i) for i in range(4)])
            await asyncio.sleep(0)
        done = True

    async def reader() -> None:
        seen: list[int] = []
        while not done or len(seen) < 120:
            got = await p.read(S, seen[-1] if seen else 0, limit=7)  # contiguous, or W9
            seen.extend(x.seq for x in got)
            await asyncio.sleep(0)
        if seen != list(range(1, 121)):
            seen_problems.append(f"a reader saw {seen[:20]}...")

    await asyncio.wait_for(asyncio.gather(writer(), reader(), reader()), 60)
    check(not seen_problems, "W9", "; ".join(seen_problems))


@SCENARIOS("refused data is never shown", also=("W2", "W5"))
async def w9_refused_data_never_shown(p: Probe) -> None:
    w = p.world
    f = await p.acquire(S)
    await p.acquire(S)
    await p.expect_error(Fenced, "stale append", w.append(S, [e(secret="x")], fence=f), "W2")
    await p.expect_error(Conflict, "append(expect=0)", w.append(S, [e(secret="x")], expect=0), "W5")
    log = await p.read_all(S)
    check(all("secret" not in x.data for x in log), "W9", f"refused data is shown: {show(log)}")
