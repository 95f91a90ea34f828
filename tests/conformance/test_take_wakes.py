"""``fxworld.take_wakes`` on a world without a native batch: the default built on
``take_wake`` passes the kit's batch checks, keeps each session once, and checks
``limit`` before any I/O."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from fxworld import MemoryWorld, take_wakes
from fxworld.errors import InvalidArgument
from fxworld.protocol import WakeBatcher, World
from fxworld.types import Entry, Fence, NewEntry, WakeLease
from fxworld_conformance.guarantees import SCENARIOS
from fxworld_conformance.runner import run_check
from fxworld_conformance.target import Target


class PlainWorld:
    """A World with no ``take_wakes``: every method passed to a MemoryWorld, as a
    third-party world that never heard of batches would have it."""

    def __init__(self) -> None:
        self.inner = MemoryWorld()
        self.capabilities = self.inner.capabilities
        self.takes = 0

    async def setup(self) -> None:
        await self.inner.setup()

    async def close(self) -> None:
        await self.inner.close()

    async def acquire(self, session_id: str) -> Fence:
        return await self.inner.acquire(session_id)

    async def append(
        self,
        session_id: str,
        entries: Sequence[NewEntry],
        *,
        fence: Fence | None = None,
        expect: int | None = None,
        key: str | None = None,
        wake: float | None = None,
    ) -> int:
        return await self.inner.append(
            session_id, entries, fence=fence, expect=expect, key=key, wake=wake
        )

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        return await self.inner.read(session_id, after, limit=limit)

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Entry]:
        return self.inner.follow(session_id, after)

    async def wake(self, session_id: str, *, delay: float = 0.0) -> None:
        await self.inner.wake(session_id, delay=delay)

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        self.takes += 1
        return await self.inner.take_wake(lease=lease)

    async def renew_wake(self, wake: WakeLease, *, lease: float) -> WakeLease:
        return await self.inner.renew_wake(wake, lease=lease)

    async def finish_wake(self, wake: WakeLease) -> None:
        await self.inner.finish_wake(wake)

    async def delete(self, session_id: str) -> None:
        await self.inner.delete(session_id)


def test_a_plain_world_is_a_world_but_not_a_wake_batcher() -> None:
    assert isinstance(PlainWorld(), World)
    assert not isinstance(PlainWorld(), WakeBatcher)
    assert isinstance(MemoryWorld(), WakeBatcher)


_BATCH_CHECK = next(s.name for s in SCENARIOS if s.id == "w12-take-wakes")


@pytest.mark.parametrize("check", [_BATCH_CHECK, "stateful wakes"])
def test_the_default_batch_passes_the_kits_batch_checks(check: str) -> None:
    results = run_check(check, Target(factory=PlainWorld))
    assert [r.status for r in results] == ["passed"], results[0].detail


async def test_the_default_batch_ends_at_a_session_handed_out_again_keeping_its_newest_lease() -> (
    None
):
    # a lease shorter than a round trip: s is due again (attempt 2) once t and u,
    # due before its lease ends, are taken
    w = PlainWorld()
    for sid in ("s", "t", "u"):
        await w.wake(sid)
    batch = await take_wakes(w, lease=0.000001, limit=10)
    assert sorted((x.session_id, x.attempt) for x in batch) == [("s", 2), ("t", 1), ("u", 1)]
    assert w.takes == 4


@pytest.mark.parametrize("limit", [0, 1001, -3, True, 1.0, "2", None])
async def test_the_default_batch_refuses_a_bad_limit_before_any_io(limit: object) -> None:
    w = PlainWorld()
    await w.wake("s")
    with pytest.raises(InvalidArgument, match="limit must be an integer from 1 to 1000"):
        await take_wakes(w, lease=30, limit=limit)  # type: ignore[arg-type]
    assert w.takes == 0
    assert [x.session_id for x in await take_wakes(w, lease=30, limit=5)] == ["s"]
