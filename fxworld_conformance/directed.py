"""Directed checks: one short, explicit scenario per guarantee, on a fresh world each.

They run first and fast, give every guarantee its own row, and cover what the
state machines do not generate: bad input (W15), the error hierarchy and
credentials (W16), declared capabilities (W17), JSON round trips, big batches,
many concurrent writers on one session. Each raises
:class:`~fxworld_conformance.model.Violation` naming the guarantee it proves
broken.
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from fxworld import World
from fxworld.errors import (
    BackendUnavailable,
    ConfigurationError,
    Conflict,
    EntryTooLarge,
    Fenced,
    InvalidArgument,
    InvalidEntry,
    InvalidSessionId,
    LeaseLost,
    WorldError,
)
from fxworld.protocol import CAPABILITIES
from fxworld.types import Entry, Fence, NewEntry, WakeLease
from fxworld_conformance.bad_values import BAD_SESSION_IDS
from fxworld_conformance.credentials import leak, password_of
from fxworld_conformance.model import Violation
from fxworld_conformance.target import CALL_TIMEOUT, Target, call_world

__all__ = ["DIRECTED", "Directed", "Probe"]

T = TypeVar("T")
LATER = 3600.0


class Probe:
    """A world wrapped for a directed check: counts calls, bounds them in time,
    and turns a non-fxworld exception into a W16 violation."""

    def __init__(self, world: World, guarantee: str) -> None:
        self.world = world
        self.guarantee = guarantee
        self.operations = 0
        self.acked: dict[str, int] = {}  # session -> greatest seq an append/acquire returned

    async def call(self, what: str, aw: Awaitable[T]) -> T:
        self.operations += 1
        return await call_world(aw, what, self.guarantee)

    async def append(self, sid: str, entries: list[NewEntry], **kw: Any) -> int:
        seq = await self.call(
            f"append({sid!r}, {len(entries)} entries, {kw})", self.world.append(sid, entries, **kw)
        )
        self.acked[sid] = max(self.acked.get(sid, 0), seq if isinstance(seq, int) else 0)
        return seq

    async def acquire(self, sid: str) -> Fence:
        f = await self.call(f"acquire({sid!r})", self.world.acquire(sid))
        if isinstance(f, Fence):
            self.acked[sid] = max(self.acked.get(sid, 0), f.seq)
        return f

    async def read(self, sid: str, after: int = 0, limit: int = 1000) -> list[Entry]:
        what = f"read({sid!r}, {after}, limit={limit})"
        got = await self.call(what, self.world.read(sid, after, limit=limit))
        seqs = [e.seq for e in got] if isinstance(got, list) else None
        if (
            seqs is None
            or seqs != list(range(after + 1, after + 1 + len(seqs)))
            or len(seqs) > limit
        ):
            raise Violation("W9", f"{what} is not a contiguous slice from {after + 1}: seqs {seqs}")
        return got

    async def read_all(self, sid: str) -> list[Entry]:
        """The whole log; an acknowledged entry missing from it is a W9 violation
        if it shows up later, else W4 (lost)."""
        out = await self._read_all(sid)
        acked = self.acked.get(sid, 0)
        if len(out) < acked:
            await asyncio.sleep(0.5)
            again = await self._read_all(sid)
            if len(again) >= acked:
                raise Violation(
                    "W9",
                    f"read of {sid!r} showed {len(out)} entries though seq {acked} was "
                    "acknowledged; the rest appeared later",
                )
            raise Violation("W4", f"acknowledged seq {acked} of {sid!r} is lost: log {show(again)}")
        return out

    async def _read_all(self, sid: str) -> list[Entry]:
        out: list[Entry] = []
        while True:
            page = await self.read(sid, out[-1].seq if out else 0)
            if not page:
                return out
            out.extend(page)

    async def wake(self, sid: str, delay: float = 0.0) -> None:
        await self.call(f"wake({sid!r}, delay={delay:g})", self.world.wake(sid, delay=delay))

    async def take(self, lease: float = 120.0) -> WakeLease | None:
        return await self.call(f"take_wake(lease={lease:g})", self.world.take_wake(lease=lease))

    async def renew(self, w: WakeLease, lease: float = 120.0) -> WakeLease:
        return await self.call("renew_wake", self.world.renew_wake(w, lease=lease))

    async def finish(self, w: WakeLease) -> None:
        await self.call("finish_wake", self.world.finish_wake(w))

    async def delete(self, sid: str) -> None:
        await self.call(f"delete({sid!r})", self.world.delete(sid))
        self.acked.pop(sid, None)

    async def expect_error(
        self, err: type[BaseException], what: str, aw: Awaitable[Any], guarantee: str
    ) -> BaseException:
        try:
            got = await self.call(what, aw)
        except err as e:
            return e
        except WorldError as e:
            raise Violation(
                guarantee, f"{what} raised {type(e).__name__}: {e}, not {err.__name__}"
            ) from e
        raise Violation(guarantee, f"{what} returned {got!r} instead of raising {err.__name__}")


def check(cond: bool, guarantee: str, message: str) -> None:
    if not cond:
        raise Violation(guarantee, message)


def msgs(n: int, tag: str = "m") -> list[NewEntry]:
    return [NewEntry("message", {"tag": tag, "i": i}) for i in range(n)]


def show(entries: list[Entry]) -> str:
    return "[" + ", ".join(f"{e.seq}:{e.kind}:{e.data}" for e in entries[:8]) + "]"


async def drain_wakes(p: Probe) -> list[WakeLease]:
    got: list[WakeLease] = []
    while (w := await p.take()) is not None:
        got.append(w)
        if len(got) > 50:
            raise Violation("W11", "take_wake keeps handing out wakes (over 50 from 3 sessions)")
    return got


# -- the checks --------------------------------------------------------------------------


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


async def w15_bad_input(p: Probe, target: Target) -> None:
    w = p.world
    good = [NewEntry("message", {"ok": True})]
    await p.append("s", good)
    for bad in BAD_SESSION_IDS.values():
        calls: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
            ("append", functools.partial(w.append, bad, good)),
            ("acquire", functools.partial(w.acquire, bad)),
            ("read", functools.partial(w.read, bad)),
            ("wake", functools.partial(w.wake, bad)),
            ("delete", functools.partial(w.delete, bad)),
        ]
        for name, make in calls:
            await p.expect_error(InvalidSessionId, f"{name}({bad!r})", make(), "W15")
        try:
            w.follow(bad)
        except InvalidSessionId:
            pass
        except Exception as e:
            raise Violation(
                "W15", f"follow({bad!r}) raised {type(e).__name__}, not InvalidSessionId"
            ) from e
        else:
            it = w.follow(bad)
            await p.expect_error(InvalidSessionId, f"follow({bad!r})", it.__anext__(), "W15")
    ok = "a" * 128
    await p.append(ok, good)
    bad_entries: list[tuple[str, Any]] = [
        ("empty kind", [NewEntry("", {})]),
        ("kind of 65 chars", [NewEntry("k" * 65, {})]),
        ("reserved kind", [NewEntry("fence", {"epoch": 99})]),
        ("list data", [NewEntry("m", [1, 2])]),  # type: ignore[arg-type]
        ("string data", [NewEntry("m", "text")]),  # type: ignore[arg-type]
        ("non-JSON value", [NewEntry("m", {"s": {1, 2}})]),
        ("NaN", [NewEntry("m", {"x": math.nan})]),
        ("non-string key", [NewEntry("m", {1: "x"})]),  # type: ignore[dict-item]
        ("tuple value", [NewEntry("m", {"t": (1, 2)})]),
        ("data nested 5,000 deep", [NewEntry("m", _nested(5000))]),
        ("empty batch", []),
        ("valid then invalid", [*good, NewEntry("", {})]),
        ("not NewEntry", [{"kind": "m", "data": {}}]),
    ]
    for what, entries in bad_entries:
        await p.expect_error(InvalidEntry, f"append with {what}", w.append("s", entries), "W15")
    limit = int(getattr(w, "max_entry_bytes", 1024 * 1024))
    huge = NewEntry("m", {"blob": "x" * (limit + 10)})
    too_large = await p.expect_error(
        EntryTooLarge, f"append of an entry over {limit} bytes", w.append("s", [*good, huge]), "W15"
    )
    check(isinstance(too_large, InvalidEntry), "W15", "EntryTooLarge must be an InvalidEntry")
    bad_args: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("read(limit=0)", lambda: w.read("s", 0, limit=0)),
        ("read(after=-1)", lambda: w.read("s", -1)),
        ("append(expect=-1)", lambda: w.append("s", good, expect=-1)),
        ("append(wake=-1)", lambda: w.append("s", good, wake=-1.0)),
        ("append(wake=nan)", lambda: w.append("s", good, wake=math.nan)),
        ("append(key='')", lambda: w.append("s", good, key="")),
        ("read(after=2**64)", lambda: w.read("s", 2**64)),
        ("read(limit=2**64)", lambda: w.read("s", 0, limit=2**64)),
        ("wake(delay=-1)", lambda: w.wake("s", delay=-1.0)),
        ("take_wake(lease=0)", lambda: w.take_wake(lease=0.0)),
        ("take_wake(lease=inf)", lambda: w.take_wake(lease=math.inf)),
        ("take_wake(lease=1e300)", lambda: w.take_wake(lease=1e300)),
        ("wake(delay=1e300)", lambda: w.wake("s", delay=1e300)),
    ]
    for what, make in bad_args:
        await p.expect_error(InvalidArgument, what, make(), "W15")
    foreign = w.append("s", good, fence=Fence("t", 1, 1))  # never the newest fence of "s"
    await p.expect_error(Fenced, "append(fence of another session)", foreign, "W2")
    log = await p.read_all("s")
    check(len(log) == 1, "W15", f"rejected calls left entries behind: {show(log)}")
    check(await p.take() is None, "W15", "a rejected append(wake=...) enqueued a wake")


def _nested(depth: int) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for _ in range(depth):
        data = {"a": data}
    return data


async def w16_errors(p: Probe, target: Target) -> None:
    for cls, bases in [
        (Fenced, (WorldError,)),
        (Conflict, (WorldError,)),
        (LeaseLost, (WorldError,)),
        (InvalidSessionId, (WorldError, ValueError)),
        (InvalidEntry, (WorldError, ValueError)),
        (EntryTooLarge, (InvalidEntry,)),
        (BackendUnavailable, (WorldError, ConnectionError)),
        (ConfigurationError, (WorldError,)),
    ]:
        check(issubclass(cls, bases), "W16", f"{cls.__name__} is not a subclass of {bases}")
    f = await p.acquire("s")
    await p.acquire("s")
    e = await p.expect_error(Fenced, "stale append", p.world.append("s", msgs(1), fence=f), "W2")
    check(isinstance(e, Fenced) and e.session_id == "s", "W16", f"Fenced carries {vars(e)}")
    if password_of(target.url):
        where = leak(repr(p.world) + "\n" + str(p.world), target.url)
        check(where is None, "W16", f"the world's repr shows the URL's password {where}")
        errors: list[str] = [str(e), repr(e)]
        for make in (lambda: p.world.read("bad id"), lambda: p.world.append("s", [])):
            try:
                await make()
            except Exception as err:
                errors.append(str(err))
        where = leak("\n".join(errors), target.url)
        check(where is None, "W16", f"an error message shows the URL's password {where}")
    # every error the world raised in this check was an fxworld error (Probe enforces it)
    await p.read("s", 0)


async def w17_capabilities(p: Probe, target: Target) -> None:
    caps = getattr(p.world, "capabilities", None)
    check(
        isinstance(caps, frozenset),
        "W17",
        f"capabilities must be a frozenset, not {type(caps).__name__}",
    )
    assert isinstance(caps, frozenset)
    check(all(isinstance(c, str) for c in caps), "W17", f"capabilities must be names: {caps!r}")
    unknown = sorted(c for c in caps if c not in CAPABILITIES and not c.startswith("x-"))
    check(
        not unknown,
        "W17",
        f"unknown capabilities {unknown}; known: {sorted(CAPABILITIES)} "
        "(or prefix x- for your own)",
    )
    check(
        "restartable" not in caps or target.restart is not None,
        "W17",
        "'restartable' is a fixture capability: give Target.restart instead of declaring it",
    )


@dataclass(frozen=True)
class Directed:
    """One directed check: ``id`` names its pytest test (``w02-fenced-append``),
    ``name`` its row in the kit's report."""

    id: str
    name: str
    guarantees: tuple[str, ...]
    run: Callable[[Probe, Target], Awaitable[None]]


DIRECTED: list[Directed] = [
    Directed(
        "w01-acquire", "W1 acquire: epochs grow, fence entries, reserved kinds", ("W1",), w1_acquire
    ),
    Directed(
        "w02-fenced-append",
        "W2 fenced append: a replaced writer stays refused",
        ("W2",),
        w2_fenced_append,
    ),
    Directed("w03-unfenced-append", "W3 unfenced append between fenced ones", ("W3",), w3_unfenced),
    Directed(
        "w04-atomic-dense-ordered",
        "W4 atomic dense batches, JSON round trip, 16 racing writers",
        ("W4",),
        w4_atomic,
    ),
    Directed("w05-expect", "W5 expect and Conflict.last", ("W5",), w5_expect),
    Directed(
        "w06-idempotency-key", "W6 idempotency keys, stale fence, racing retries", ("W6",), w6_key
    ),
    Directed(
        "w07-append-wake-is-atomic",
        "W7 append + wake, no wake for a refused append",
        ("W7",),
        w7_append_wake,
    ),
    Directed(
        "w08-epoch-monotone-log", "W8 epochs never decrease along the log", ("W8",), w8_epochs
    ),
    Directed("w09-read", "W9 paged reads, readers racing writers", ("W9",), w9_read),
    Directed("w10-follow", "W10 follow, new entries, reconnect", ("W10",), w10_follow),
    Directed(
        "w10-follow-cancelled",
        "W10 follow stops when its consumer is cancelled",
        ("W10",),
        w10_follow_cancel,
    ),
    Directed("w11-wake-coalescing", "W11 wake coalescing and due times", ("W11",), w11_coalesce),
    Directed("w12-lease", "W12 leases, expiry, redelivery, LeaseLost", ("W12",), w12_lease),
    Directed("w13-finish", "W13 finish keeps a re-wake", ("W13",), w13_finish),
    Directed("w14-delete", "W14 delete: log, keys, wake, old fences", ("W14",), w14_delete),
    Directed("w15-bad-input", "W15 bad input refused before any write", ("W15",), w15_bad_input),
    Directed("w16-errors", "W16 error hierarchy and credentials", ("W16",), w16_errors),
    Directed("w17-capabilities", "W17 capabilities declared", ("W17",), w17_capabilities),
]


async def run_directed(
    d: Directed, target: Target, counter: list[int] | None = None
) -> tuple[int, float]:
    """Run one directed check on a fresh world; return (operations, seconds).
    ``counter[0]`` gets the operation count even when the check fails."""
    started = time.monotonic()
    world = await asyncio.wait_for(target.open(), CALL_TIMEOUT)
    p = Probe(world, d.guarantees[0])
    try:
        await d.run(p, target)
    finally:
        if counter is not None:
            counter[:] = [p.operations]
        try:
            await asyncio.wait_for(world.close(), CALL_TIMEOUT)
        except Exception:
            pass
    return p.operations, time.monotonic() - started
