"""What every directed check works through: :class:`Probe` (the world, counted,
bounded in time, its foreign errors made W16 violations) and small helpers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from fxworld import World
from fxworld.errors import WorldError
from fxworld.types import Entry, Fence, NewEntry, WakeLease
from fxworld_conformance.model import Violation
from fxworld_conformance.target import call_world

__all__ = ["Probe", "check", "msgs", "show", "drain_wakes"]


T = TypeVar("T")


class Probe:
    """A world wrapped for a directed check: counts calls, bounds them in time,
    and turns a non-fxworld exception into a W16 violation."""

    def __init__(self, world: World, guarantee: str) -> None:
        self.world = world
        self.guarantee = guarantee
        self.operations = 0
        self.acked: dict[str, int] = {}  # session -> greatest seq an append/acquire returned
        self.notes: dict[str, Any] = {}
        """Figures a check leaves for its report row (its ``extra``)."""

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
