"""W15: every bad input is refused with a typed error and leaves stored data untouched.

A mixin of :class:`fxworld_conformance.examples.AsyncExamples`: each test takes
the ``world`` fixture (a fresh, set-up, empty world)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from fxworld import NewEntry, World
from fxworld.errors import (
    Conflict,
    EntryTooLarge,
    Fenced,
    InvalidArgument,
    InvalidEntry,
    InvalidSessionId,
)
from fxworld.validate import DEFAULT_MAX_ENTRY_BYTES, MAX_SECONDS, MAX_SEQ
from fxworld_conformance.bad_values import BAD_SESSION_IDS
from fxworld_conformance.examples._support import (
    BAD_AFTERS,
    BAD_DELAYS,
    BAD_ENTRY_LISTS,
    BAD_EXPECTS,
    BAD_KEYS,
    BAD_KINDS,
    BAD_LEASES,
    BAD_LIMITS,
    NON_JSON_DATA,
    NON_OBJECT_DATA,
    OTHER,
    RESERVED_KINDS,
    S,
    e,
    follow_first,
    no_wake,
    seed,
    snapshot,
)


class BadInputExamples:
    """W15."""

    secrets: tuple[str, ...] = ()

    # -- W15 bad input -------------------------------------------------------------

    @pytest.mark.parametrize("bad", BAD_SESSION_IDS.values(), ids=BAD_SESSION_IDS.keys())
    async def test_W15_bad_session_ids_are_refused_everywhere(self, world: World, bad: Any) -> None:
        _, before = await seed(world)
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: world.acquire(bad),
            lambda: world.append(bad, [e()], key="k", wake=0),
            lambda: world.read(bad),
            lambda: world.wake(bad),
            lambda: world.delete(bad),
            lambda: follow_first(world, bad),
        ]
        for call in calls:
            with pytest.raises(InvalidSessionId):
                await call()
        assert await snapshot(world) == before
        await no_wake(world)

    @pytest.mark.parametrize(
        "kind", [*RESERVED_KINDS, *BAD_KINDS.values()], ids=[*RESERVED_KINDS, *BAD_KINDS]
    )
    async def test_W15_reserved_or_bad_kinds_are_refused(self, world: World, kind: Any) -> None:
        _, before = await seed(world)
        with pytest.raises(InvalidEntry):
            await world.append(S, [NewEntry(kind, {"x": 1})], key="new", wake=0)
        assert await snapshot(world) == before
        await no_wake(world)

    @pytest.mark.parametrize("data", NON_OBJECT_DATA, ids=repr)
    async def test_W15_non_object_data_is_refused(self, world: World, data: Any) -> None:
        _, before = await seed(world)
        with pytest.raises(InvalidEntry):
            await world.append(S, [NewEntry("msg", data)], key="new", wake=0)
        assert await snapshot(world) == before
        await no_wake(world)

    @pytest.mark.parametrize("data", NON_JSON_DATA.values(), ids=NON_JSON_DATA.keys())
    async def test_W15_non_json_values_are_refused(self, world: World, data: Any) -> None:
        fence, before = await seed(world)
        with pytest.raises(InvalidEntry):
            await world.append(S, [e(ok=1), NewEntry("msg", data)], fence=fence, wake=0)
        assert await snapshot(world) == before
        await no_wake(world)

    @pytest.mark.parametrize("entries", BAD_ENTRY_LISTS, ids=repr)
    async def test_W15_bad_entry_lists_are_refused(self, world: World, entries: Any) -> None:
        _, before = await seed(world)
        with pytest.raises(InvalidEntry):
            await world.append(S, entries, wake=0)
        assert await snapshot(world) == before
        await no_wake(world)

    async def test_W15_oversized_entries_are_refused(self, world: World) -> None:
        fence, before = await seed(world)
        limit = getattr(world, "max_entry_bytes", DEFAULT_MAX_ENTRY_BYTES)
        overhead = len('{"x":""}')
        just_fits = NewEntry("big", {"x": "a" * (limit - overhead)})
        too_big = NewEntry("big", {"x": "a" * (limit - overhead + 1)})
        with pytest.raises(EntryTooLarge) as info:
            await world.append(S, [e(), too_big], fence=fence, key="big", wake=0)
        assert info.value.limit == limit and info.value.size == limit + 1
        assert isinstance(info.value, InvalidEntry) and isinstance(info.value, ValueError)
        # Multi-byte characters count as their UTF-8 size.
        with pytest.raises(EntryTooLarge):
            await world.append(S, [NewEntry("big", {"x": "é" * (limit // 2)})])
        assert await snapshot(world) == before
        await no_wake(world)
        seq = await world.append(S, [just_fits], fence=fence)
        assert (await world.read(S, seq - 1))[0].data == just_fits.data

    @pytest.mark.parametrize("expect", BAD_EXPECTS, ids=repr)
    async def test_W15_bad_expect_is_refused(self, world: World, expect: Any) -> None:
        _, before = await seed(world)
        with pytest.raises(InvalidArgument):
            await world.append(S, [e()], expect=expect, wake=0)
        assert await snapshot(world) == before
        await no_wake(world)

    @pytest.mark.parametrize("key", BAD_KEYS.values(), ids=BAD_KEYS.keys())
    async def test_W15_bad_key_is_refused(self, world: World, key: Any) -> None:
        _, before = await seed(world)
        with pytest.raises(InvalidArgument):
            await world.append(S, [e()], key=key, wake=0)
        assert await snapshot(world) == before
        await no_wake(world)

    async def test_W15_bad_fences_are_refused(self, world: World) -> None:
        fence, before = await seed(world)
        other = await world.acquire(OTHER)
        before = await snapshot(world)
        with pytest.raises(Fenced, match="belongs to session"):  # never the newest of S (W2)
            await world.append(S, [e()], fence=other, wake=0)
        with pytest.raises(InvalidArgument):
            await world.append(S, [e()], fence=(S, fence.epoch, fence.seq), wake=0)  # type: ignore[arg-type]
        assert await snapshot(world) == before
        await no_wake(world)

    @pytest.mark.parametrize("limit", BAD_LIMITS, ids=repr)
    async def test_W15_bad_limit_is_refused(self, world: World, limit: Any) -> None:
        _, before = await seed(world)
        with pytest.raises(InvalidArgument):
            await world.read(S, 0, limit=limit)
        assert await snapshot(world) == before

    @pytest.mark.parametrize("after", BAD_AFTERS, ids=repr)
    async def test_W15_bad_cursor_is_refused(self, world: World, after: Any) -> None:
        _, before = await seed(world)
        with pytest.raises(InvalidArgument):
            await world.read(S, after)
        with pytest.raises(InvalidArgument):
            await follow_first(world, S, after)
        assert await snapshot(world) == before

    @pytest.mark.parametrize("delay", BAD_DELAYS, ids=repr)
    async def test_W15_bad_delay_is_refused(self, world: World, delay: Any) -> None:
        _, before = await seed(world)
        with pytest.raises(InvalidArgument):
            await world.wake(S, delay=delay)
        with pytest.raises(InvalidArgument):
            await world.append(S, [e()], wake=delay)
        assert await snapshot(world) == before
        await no_wake(world)

    @pytest.mark.parametrize("lease", BAD_LEASES, ids=repr)
    async def test_W15_bad_lease_is_refused(self, world: World, lease: Any) -> None:
        _, before = await seed(world)
        await world.wake(S)
        with pytest.raises(InvalidArgument):
            await world.take_wake(lease=lease)
        held = await world.take_wake(lease=5)  # the bad call took nothing
        assert held is not None and held.attempt == 1
        with pytest.raises(InvalidArgument):
            await world.renew_wake(held, lease=lease)
        await world.finish_wake(held)  # the bad renew changed nothing
        await no_wake(world)
        assert await snapshot(world) == before

    async def test_W15_the_largest_allowed_values_work(self, world: World) -> None:
        """The bounds themselves are accepted and stored as the backend's own types."""
        await seed(world)
        assert await world.read(S, MAX_SEQ) == []
        assert len(await world.read(S, 0, limit=MAX_SEQ)) == 4
        with pytest.raises(Conflict):
            await world.append(S, [e()], expect=MAX_SEQ)
        await world.wake(S, delay=MAX_SECONDS)
        await no_wake(world)  # due in a hundred years
        await world.wake(OTHER)
        lease = await world.take_wake(lease=MAX_SECONDS)
        assert lease is not None and lease.session_id == OTHER
        assert lease.expires_at.year >= datetime.now(UTC).year + 99
        lease = await world.renew_wake(lease, lease=MAX_SECONDS)
        await world.finish_wake(lease)
        await no_wake(world)
