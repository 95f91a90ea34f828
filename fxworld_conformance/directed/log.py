"""Directed checks of the log: acquire and fences, appends, batches, expect, keys,
an append's wake, epochs, reads and follow (W1-W10)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from fxworld.errors import Conflict, Fenced, InvalidEntry
from fxworld.types import Entry, Fence, NewEntry
from fxworld_conformance.directed.probe import Probe, check, drain_wakes, msgs, show
from fxworld_conformance.model import Violation
from fxworld_conformance.target import Target

__all__ = [
    "w1_acquire",
    "w2_fenced_append",
    "w3_unfenced",
    "w4_atomic",
    "w5_expect",
    "w6_key",
    "w7_append_wake",
    "w8_epochs",
    "w9_read",
    "w10_follow",
    "w10_follow_cancel",
]


async def w1_acquire(p: Probe, target: Target) -> None:
    f1 = await p.acquire("s")
    f2 = await p.acquire("s")
    check(isinstance(f1, Fence) and f1.session_id == "s", "W1", f"acquire returned {f1!r}")
    check(f2.epoch > f1.epoch, "W1", f"second acquire epoch {f2.epoch} is not above {f1.epoch}")
    log = await p.read_all("s")
    check(len(log) == 2, "W1", f"two acquires should append two fence entries, log: {show(log)}")
    for f, e in zip((f1, f2), log, strict=True):
        check(
            e.seq == f.seq
            and e.kind == "fence"
            and e.data == {"epoch": f.epoch}
            and e.epoch == f.epoch,
            "W1",
            f"fence entry for {f!r} is {e!r}",
        )
    await p.delete("s")
    f3 = await p.acquire("s")
    check(
        f3.epoch > f2.epoch,
        "W1",
        f"acquire after delete returned epoch {f3.epoch}, not above {f2.epoch}",
    )
    check(f3.seq == 1, "W1", f"first fence after delete landed at seq {f3.seq}, not 1")
    for kind in ("fence", "fenced", "fence-x"):
        await p.expect_error(
            InvalidEntry,
            f"append of reserved kind {kind!r}",
            p.world.append("s", [NewEntry(kind, {})]),
            "W1",
        )
    many = await asyncio.gather(*(p.acquire("race") for _ in range(8)))
    epochs = [f.epoch for f in many]
    check(len(set(epochs)) == 8, "W1", f"8 concurrent acquires returned epochs {epochs}")
    by_seq = sorted(many, key=lambda f: f.seq)
    check(
        [f.epoch for f in by_seq] == sorted(epochs),
        "W1",
        f"epochs are not increasing along the log: {[(f.seq, f.epoch) for f in by_seq]}",
    )


async def w2_fenced_append(p: Probe, target: Target) -> None:
    f1 = await p.acquire("s")
    s1 = await p.append("s", msgs(1), fence=f1)
    f2 = await p.acquire("s")
    for attempt in range(3):
        e = await p.expect_error(
            Fenced,
            f"append with the replaced fence (attempt {attempt + 1})",
            p.world.append("s", msgs(2, "stale"), fence=f1),
            "W2",
        )
        check(isinstance(e, Fenced), "W2", "")
    s2 = await p.append("s", msgs(1, "new"), fence=f2)
    log = await p.read_all("s")
    check(
        [e.seq for e in log] == [1, 2, 3, 4] and s1 == 2 and s2 == 4,
        "W2",
        f"a refused append left a trace or positions moved: {show(log)}",
    )
    check(
        all(e.data.get("tag") != "stale" for e in log), "W2", f"refused entries landed: {show(log)}"
    )
    check(
        log[3].epoch == f2.epoch and log[1].epoch == f1.epoch,
        "W2",
        f"fenced entries carry the wrong epoch: {show(log)}",
    )


async def w3_unfenced(p: Probe, target: Target) -> None:
    f1 = await p.acquire("s")
    await p.append("s", msgs(1), fence=f1)
    seq = await p.append("s", [NewEntry("prompt", {"text": "hi"})])
    await p.acquire("s")
    seq2 = await p.append("s", [NewEntry("prompt", {"text": "again"})])
    check(seq == 3 and seq2 == 5, "W3", f"unfenced appends returned {seq}, {seq2}; expected 3, 5")
    log = await p.read_all("s")
    check(
        log[2].epoch is None and log[4].epoch is None,
        "W3",
        f"unfenced entries must have epoch None: {show(log)}",
    )


JSON_SAMPLES: list[dict[str, Any]] = [
    {},
    {"text": "héllo wörld ✓ 日本語 🙂", "nul": "a\u0000b", "quote": "\"'\\"},
    {"n": 0, "neg": -7, "big": 2**53 + 1, "f": 0.1, "tiny": 1e-300, "huge": 1.5e300},
    {"nested": {"list": [1, [2, [3, {"k": None}]]], "t": True, "f": False}},
    {"": "empty key", "ключ": "значение", "a.b": [1, "2", 3.5]},
]


async def w4_atomic(p: Probe, target: Target) -> None:
    seq = await p.append("s", [NewEntry("message", d) for d in JSON_SAMPLES])
    check(seq == len(JSON_SAMPLES), "W4", f"a batch of {len(JSON_SAMPLES)} returned {seq}")
    log = await p.read_all("s")
    for e, d in zip(log, JSON_SAMPLES, strict=False):
        check(
            e.data == d,
            "W4",
            f"entry {e.seq} data changed on the way: wrote {d!r}, read {e.data!r}",
        )
        check(
            isinstance(e.at, datetime) and e.at.utcoffset() is not None,
            "W4",
            f"entry {e.seq} time {e.at!r} is not timezone-aware",
        )
    check(len(log) == len(JSON_SAMPLES), "W4", f"log holds {len(log)} entries: {show(log)}")
    # many concurrent writers on one session: every batch contiguous, positions dense
    base = len(log)

    async def writer(w: int) -> tuple[int, int]:
        return w, await p.append("c", [NewEntry("message", {"w": w, "i": i}) for i in range(3)])

    results = await asyncio.gather(*(writer(w) for w in range(16)))
    got = await p.read_all("c")
    check(len(got) == 48, "W4", f"16 concurrent batches of 3 left {len(got)} entries")
    check(
        [e.seq for e in got] == list(range(1, 49)),
        "W4",
        f"positions not dense: {[e.seq for e in got]}",
    )
    for w, last in results:
        chunk = got[last - 3 : last]
        check(
            [(e.data.get("w"), e.data.get("i")) for e in chunk] == [(w, 0), (w, 1), (w, 2)],
            "W4",
            f"batch of writer {w} (returned seq {last}) is torn or interleaved: {show(chunk)}",
        )
    del base
    big = [NewEntry("message", {"i": i}) for i in range(300)]
    s = await p.append("big", big)
    check(
        s == 300 and len(await p.read_all("big")) == 300,
        "W4",
        "a batch of 300 entries did not land whole",
    )


async def w5_expect(p: Probe, target: Target) -> None:
    s1 = await p.append("s", msgs(2), expect=0)
    check(s1 == 2, "W5", f"expect=0 on an empty log returned {s1}")
    for wrong in (0, 1, 3, 99):
        e = await p.expect_error(
            Conflict,
            f"append(expect={wrong}) on a log at 2",
            p.world.append("s", msgs(1, "x"), expect=wrong),
            "W5",
        )
        check(
            isinstance(e, Conflict) and e.last == 2,
            "W5",
            f"Conflict.last is {getattr(e, 'last', None)}, the log's last seq is 2",
        )
    check(
        await p.append("s", msgs(1), expect=2) == 3,
        "W5",
        "expect=2 on a log at 2 did not land at 3",
    )
    log = await p.read_all("s")
    check(
        len(log) == 3 and all(e.data.get("tag") != "x" for e in log),
        "W5",
        f"a Conflict wrote: {show(log)}",
    )


async def w6_key(p: Probe, target: Target) -> None:
    f1 = await p.acquire("s")
    batch = [NewEntry("prompt", {"text": "once"}), NewEntry("prompt", {"text": "twice?"})]
    s1 = await p.append("s", batch, key="k1", fence=f1)
    again = await p.append("s", batch, key="k1", fence=f1)
    check(again == s1, "W6", f"a keyed repeat returned {again}, the first call {s1}")
    await p.acquire("s")
    stale = await p.append("s", batch, key="k1", fence=f1)
    check(stale == s1, "W6", f"a keyed repeat with a now-stale fence returned {stale}, not {s1}")
    wrong = await p.append("s", batch, key="k1", expect=99)
    check(wrong == s1, "W6", f"a keyed repeat with a wrong expect returned {wrong}, not {s1}")
    log = await p.read_all("s")
    check(len(log) == 4, "W6", f"repeats wrote entries: {show(log)}")
    other = await p.append("t", batch, key="k1")
    check(other == 2, "W6", f"the same key in another session must land there; returned {other}")
    racers = await asyncio.gather(*(p.append("r", batch, key="same") for _ in range(6)))
    check(len(set(racers)) == 1, "W6", f"6 concurrent calls with one key returned {racers}")
    check(
        len(await p.read_all("r")) == 2, "W6", "concurrent calls with one key landed more than once"
    )


async def w7_append_wake(p: Probe, target: Target) -> None:
    await drain_wakes(p)
    await p.append("s", msgs(1), wake=0.0)
    got = await p.take()
    check(
        got is not None and got.session_id == "s",
        "W7",
        f"append(wake=0) then take_wake gave {got!r}",
    )
    assert got is not None
    await p.finish(got)
    await p.expect_error(
        Conflict,
        "append(expect=99, wake=0)",
        p.world.append("t", msgs(1), expect=99, wake=0.0),
        "W5",
    )
    f = await p.acquire("u")
    await p.acquire("u")
    await p.expect_error(
        Fenced, "append(stale fence, wake=0)", p.world.append("u", msgs(1), fence=f, wake=0.0), "W2"
    )
    left = await p.take()
    check(left is None, "W7", f"a refused append still enqueued a wake: take_wake gave {left!r}")


async def w8_epochs(p: Probe, target: Target) -> None:
    fences = [await p.acquire("s")]
    for round_ in range(3):
        await p.append("s", msgs(2, f"r{round_}"), fence=fences[-1])
        fences.append(await p.acquire("s"))
        for old in fences[:-1]:
            await p.expect_error(
                Fenced,
                "append with a replaced fence",
                p.world.append("s", msgs(1, "old"), fence=old),
                "W2",
            )
    log = await p.read_all("s")
    epochs = [e.epoch for e in log if e.epoch is not None]
    check(epochs == sorted(epochs), "W8", f"epochs decrease along the log: {epochs}")


async def w9_read(p: Probe, target: Target) -> None:
    check(await p.read("never-written") == [], "W9", "an unknown session must read as empty")
    await p.append("s", msgs(10))
    page = await p.read("s", 3, 4)
    check(
        [e.seq for e in page] == [4, 5, 6, 7],
        "W9",
        f"read(after=3, limit=4) gave {[e.seq for e in page]}",
    )
    check(await p.read("s", 10) == [], "W9", "read past the end must be empty")
    check(await p.read("s", 50) == [], "W9", "read far past the end must be empty")
    full = await p.read("s", 0, 1000)
    check([e.seq for e in full] == list(range(1, 11)), "W9", f"read gave {[e.seq for e in full]}")
    # readers racing writers never see a hole, and never go backwards
    stop = asyncio.Event()
    seen: list[str] = []

    async def reader() -> None:
        last = 0
        while not stop.is_set():
            got = await p.read("race")
            seqs = [e.seq for e in got]
            if seqs != list(range(1, len(seqs) + 1)):
                seen.append(f"read showed seqs {seqs}")
            if len(seqs) < last:
                seen.append(f"a reader went backwards from {last} to {len(seqs)}")
            last = len(seqs)
            await asyncio.sleep(0)

    async def writer(w: int) -> None:
        for i in range(5):
            await p.append(
                "race", [NewEntry("message", {"w": w, "i": i, "j": j}) for j in range(2)]
            )

    readers = [asyncio.ensure_future(reader()) for _ in range(3)]
    await asyncio.gather(*(writer(w) for w in range(4)))
    stop.set()
    await asyncio.gather(*readers)
    check(not seen, "W9", "; ".join(seen[:3]))


async def w10_follow(p: Probe, target: Target) -> None:
    await p.append("s", msgs(3))
    got: list[Entry] = []

    async def follow(after: int, n: int) -> None:
        it = p.world.follow("s", after)
        try:
            async for e in it:
                want = got[-1].seq + 1 if got else after + 1
                if e.seq != want:
                    raise Violation(
                        "W10",
                        f"follow(after={after}) yielded seq {e.seq} where seq {want} was due "
                        f"(a gap or a duplicate); before it: {[x.seq for x in got]}",
                    )
                got.append(e)
                if len(got) >= n:
                    break
        finally:
            aclose = getattr(it, "aclose", None)
            if aclose is not None:
                await aclose()

    task = asyncio.ensure_future(follow(1, 4))
    await asyncio.sleep(0.05)
    await p.append("s", msgs(2, "later"))
    try:
        await asyncio.wait_for(task, 10.0)
    except TimeoutError:
        raise Violation(
            "W10", f"follow did not yield new entries within 10 s; got {show(got)}"
        ) from None
    check([e.seq for e in got] == [2, 3, 4, 5], "W10", f"follow(after=1) yielded {show(got)}")
    await p.append("s", msgs(2, "more"))
    await asyncio.wait_for(follow(got[-1].seq, 6), 10.0)
    check(
        [e.seq for e in got] == [2, 3, 4, 5, 6, 7],
        "W10",
        f"reconnecting from the last seq seen gave a gap or duplicate: {[e.seq for e in got]}",
    )
    log = await p.read_all("s")
    check(
        [(e.seq, e.data) for e in got] == [(e.seq, e.data) for e in log[1:]],
        "W10",
        "follow yielded entries that differ from read()",
    )


async def w10_follow_cancel(p: Probe, target: Target) -> None:
    """A follower whose task is cancelled stops, even when the cancel arrives just as
    new entries wake it (a classic asyncio.wait_for trap on Python 3.11)."""
    for i in range(10):

        async def consume(after: int) -> None:
            async for _ in p.world.follow("s", after):
                pass

        last = await p.append("s", msgs(1, f"c{i}"))
        # half wait at the end of the log, half far past it (woken, nothing to yield)
        task = asyncio.ensure_future(consume(last if i % 2 else last + 10**6))
        # let the follower reach its wait for new entries (or be on its way there)
        await asyncio.sleep((0.0, 0.05, 0.01)[i % 3])
        # the append awaited directly (no wrapper task), so the cancel below lands in
        # the same loop iteration as the change signal
        p.operations += 1
        await p.world.append("s", msgs(1, f"wake{i}"))
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
