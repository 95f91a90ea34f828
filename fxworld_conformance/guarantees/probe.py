"""What every scenario works through: :class:`Probe` (the world, counted, bounded
in time, its foreign errors made W16 violations) and the helpers the scenarios
share: the sessions they use, seeding, snapshots, waiting for a wake."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from fxworld import World
from fxworld.errors import WorldError
from fxworld.protocol import SessionLister
from fxworld.types import Entry, Fence, NewEntry, WakeLease
from fxworld_conformance.model import Violation
from fxworld_conformance.target import Target, call_world

__all__ = [
    "Probe",
    "Skip",
    "check",
    "msgs",
    "show",
    "drain_wakes",
    "S",
    "OTHER",
    "LIVE",
    "LATER",
    "e",
    "view",
    "seed",
    "snapshot",
    "no_wake",
    "follow_first",
    "take_unless_early",
    "take_when_due",
    "too_slow",
    "epochs_monotone",
]


T = TypeVar("T")
E = TypeVar("E", bound=BaseException)

S = "s1"
OTHER = "s2"
LIVE = 5.0  # seconds: generous liveness timeout on a loaded machine
LATER = 3600.0  # seconds: a due time no scenario reaches


class Skip(Exception):
    """A scenario that cannot run here (the world lacks what it needs, or the
    machine was too loaded for a timing to mean anything): its row is skipped with
    this reason, not failed."""


class Probe:
    """A world wrapped for a directed check: counts calls, bounds them in time,
    and turns a non-fxworld exception into a W16 violation."""

    def __init__(self, world: World, guarantee: str, target: Target) -> None:
        self.world = world
        self.guarantee = guarantee
        self.target = target
        self.operations = 0
        self.acked: dict[str, int] = {}  # session -> greatest seq an append/acquire returned
        self.notes: dict[str, Any] = {}
        """Figures a check leaves for its report row (its ``extra``)."""
        self.url: str | None = None
        """The URL of this world, namespace included, when the kit opened it by URL:
        a second world opened on it shares the storage, as another process would."""

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
        out = await self.all_entries(sid)
        acked = self.acked.get(sid, 0)
        if len(out) < acked:
            await asyncio.sleep(0.5)
            again = await self.all_entries(sid)
            if len(again) >= acked:
                raise Violation(
                    "W9",
                    f"read of {sid!r} showed {len(out)} entries though seq {acked} was "
                    "acknowledged; the rest appeared later",
                )
            raise Violation("W4", f"acknowledged seq {acked} of {sid!r} is lost: log {show(again)}")
        return out

    async def all_entries(self, sid: str) -> list[Entry]:
        """The whole log, page by page, each page a contiguous slice (W9)."""
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
        self, err: type[E], what: str, aw: Awaitable[Any], guarantee: str | None = None
    ) -> E:
        """The error ``aw`` raised, which must be an ``err``; else a violation of
        ``guarantee`` (the scenario's own by default)."""
        guarantee = guarantee or self.guarantee
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


def e(kind: str = "msg", **data: Any) -> NewEntry:
    return NewEntry(kind, data)


def view(entries: list[Entry]) -> list[tuple[int, str, dict[str, Any], int | None]]:
    """What a log shows, without commit times."""
    return [(x.seq, x.kind, x.data, x.epoch) for x in entries]


async def snapshot(p: Probe) -> tuple[object, ...]:
    """Everything the scenarios seeded, as a comparable value."""
    logs = (view(await p.all_entries(S)), view(await p.all_entries(OTHER)))
    w = p.world
    listed = await w.list_sessions() if isinstance(w, SessionLister) else None
    return (logs, listed)


async def seed(p: Probe) -> tuple[Fence, tuple[object, ...]]:
    """A session with a fence and a few entries, and no wake pending."""
    fence = await p.world.acquire(S)
    await p.world.append(S, [e(n=1), e(n=2)], fence=fence, key="seed-1")
    await p.world.append(S, [e("prompt", text="hi")])
    return fence, await snapshot(p)


async def no_wake(p: Probe, guarantee: str | None = None) -> None:
    """No wake is due; else a violation of ``guarantee`` (the scenario's own)."""
    lease = await p.world.take_wake(lease=5)
    check(lease is None, guarantee or p.guarantee, f"a wake was due: {lease}")


async def follow_first(world: World, sid: Any, after: Any = 0) -> Entry:
    """The first entry ``follow`` yields (validation may happen at the call or at
    the first step)."""
    it = world.follow(sid, after)
    try:
        return await asyncio.wait_for(anext(it), LIVE)
    finally:
        aclose = getattr(it, "aclose", None)
        if aclose is not None:
            await aclose()


async def take_unless_early(
    p: Probe, since: float, due_in: float, guarantee: str = "W11"
) -> WakeLease | None:
    """``take_wake``, failing ``guarantee`` if it hands out a wake before ``due_in``
    seconds after ``since`` (a ``time.monotonic()`` read before the call that set
    the due time, or took the lease that must run out first).

    On a loaded machine the call may end after the due time; then a lease is
    legitimate, so the check never fails falsely.
    """
    lease = await p.world.take_wake(lease=5)
    if lease is not None:
        elapsed = time.monotonic() - since
        check(
            elapsed >= due_in, guarantee, f"{lease} delivered {elapsed:.3f}s in, due at {due_in}s"
        )
    return lease


async def take_when_due(p: Probe, lease: WakeLease | None, wait: float) -> WakeLease:
    """``lease`` if already taken, else the wake taken after ``wait`` seconds."""
    if lease is None:
        await asyncio.sleep(wait)
        lease = await p.world.take_wake(lease=5)
    check(lease is not None, p.guarantee, "a due wake was not delivered")
    assert lease is not None
    return lease


def too_slow(since: float, budget: float) -> None:
    """Skip a timing scenario the machine was too loaded to make meaningful."""
    if time.monotonic() - since >= budget:
        raise Skip(f"the machine took over {budget}s for a step that needed less")


def epochs_monotone(entries: list[Entry]) -> bool:
    epochs = [x.epoch for x in entries if x.epoch is not None]
    return all(a <= b for a, b in itertools.pairwise(epochs))
