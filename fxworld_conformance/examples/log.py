"""W1-W6, W8, W9: acquire, fenced and unfenced appends, batches, expect, keys, epochs, reads.

A mixin of :class:`fxworld_conformance.examples.AsyncExamples`: each test takes
the ``world`` fixture (a fresh, set-up, empty world)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from fxworld import Fence, NewEntry, World
from fxworld.errors import (
    Conflict,
    Fenced,
    InvalidEntry,
)
from fxworld_conformance.examples._support import (
    LIVE,
    OTHER,
    RESERVED_KINDS,
    S,
    all_entries,
    e,
    epochs_monotone,
    no_wake,
    seed,
    snapshot,
    view,
)


class LogExamples:
    """W1-W6, W8, W9."""

    secrets: tuple[str, ...] = ()

    # -- W1 acquire ----------------------------------------------------------------

    async def test_W1_acquire_appends_a_fence_entry_with_a_greater_epoch(
        self, world: World
    ) -> None:
        f1 = await world.acquire(S)
        await world.append(S, [e()], fence=f1)
        f2 = await world.acquire(S)
        assert f1.session_id == f2.session_id == S
        assert f2.epoch > f1.epoch >= 1
        log = await all_entries(world, S)
        assert [x.kind for x in log] == ["fence", "msg", "fence"]
        for fence in (f1, f2):
            entry = log[fence.seq - 1]
            assert entry.seq == fence.seq
            assert entry.kind == "fence"
            assert entry.data == {"epoch": fence.epoch}
            assert entry.epoch == fence.epoch

    async def test_W1_acquire_makes_every_older_fence_stale_at_once(self, world: World) -> None:
        f1 = await world.acquire(S)
        # The previous holder never released: acquire does not wait for it.
        f2 = await asyncio.wait_for(world.acquire(S), LIVE)
        with pytest.raises(Fenced):
            await world.append(S, [e()], fence=f1)
        assert await world.append(S, [e()], fence=f2) == f2.seq + 1

    async def test_W1_concurrent_acquires_get_distinct_growing_epochs(self, world: World) -> None:
        fences = await asyncio.gather(*(world.acquire(S) for _ in range(12)))
        epochs = [f.epoch for f in fences]
        assert len(set(epochs)) == 12
        log = await all_entries(world, S)
        assert [x.kind for x in log] == ["fence"] * 12
        # Along the log, fence epochs strictly grow.
        logged = [x.epoch for x in log]
        assert logged == sorted(logged) and len(set(logged)) == 12  # type: ignore[type-var]
        newest = max(fences, key=lambda f: f.epoch)
        for f in fences:
            if f is not newest:
                with pytest.raises(Fenced):
                    await world.append(S, [e()], fence=f)
        await world.append(S, [e()], fence=newest)

    async def test_W1_epoch_grows_across_delete(self, world: World) -> None:
        f1 = await world.acquire(S)
        f2 = await world.acquire(S)
        await world.delete(S)
        f3 = await world.acquire(S)
        assert f3.epoch > f2.epoch > f1.epoch
        assert f3.seq == 1

    async def test_W1_epochs_are_per_session(self, world: World) -> None:
        await world.acquire(S)
        await world.acquire(S)
        f_other = await world.acquire(OTHER)
        assert f_other.seq == 1
        await world.append(OTHER, [e()], fence=f_other)

    async def test_W1_fence_kinds_are_reserved(self, world: World) -> None:
        for kind in RESERVED_KINDS:
            with pytest.raises(InvalidEntry):
                await world.append(S, [NewEntry(kind, {"epoch": 99})])
        assert await world.read(S) == []

    # -- W2 fenced append ----------------------------------------------------------

    async def test_W2_fenced_append_with_the_newest_fence_lands_with_its_epoch(
        self, world: World
    ) -> None:
        f = await world.acquire(S)
        seq = await world.append(S, [e(n=1), e(n=2)], fence=f)
        assert seq == f.seq + 2
        log = await world.read(S, f.seq)
        assert [(x.data, x.epoch) for x in log] == [({"n": 1}, f.epoch), ({"n": 2}, f.epoch)]

    async def test_W2_stale_fence_is_refused_every_time_and_writes_nothing(
        self, world: World
    ) -> None:
        old = await world.acquire(S)
        await world.append(S, [e(n=1)], fence=old)
        new = await world.acquire(S)
        before = view(await all_entries(world, S))
        for _ in range(3):
            with pytest.raises(Fenced) as info:
                await world.append(S, [e(n=2)], fence=old, wake=0)
            assert info.value.session_id == S
            assert info.value.epoch == old.epoch
            assert info.value.current in (None, new.epoch)
        assert view(await all_entries(world, S)) == before
        await no_wake(world)
        await world.append(S, [e(n=3)], fence=new)
        with pytest.raises(Fenced):  # still out after its successor wrote
            await world.append(S, [e(n=4)], fence=old)
        assert [x.data for x in await all_entries(world, S)][-1] == {"n": 3}

    async def test_W2_a_fence_never_handed_out_is_refused(self, world: World) -> None:
        with pytest.raises(Fenced):
            await world.append(S, [e()], fence=Fence(S, 1, 1))
        f = await world.acquire(S)
        with pytest.raises(Fenced):
            await world.append(S, [e()], fence=Fence(S, f.epoch + 1, f.seq))
        assert [x.kind for x in await world.read(S)] == ["fence"]

    # -- W3 unfenced append --------------------------------------------------------

    async def test_W3_unfenced_append_lands_between_fenced_appends(self, world: World) -> None:
        assert await world.append(S, [e("prompt", n=0)]) == 1
        f = await world.acquire(S)
        await world.append(S, [e(n=1)], fence=f)
        await world.append(S, [e("prompt", n=2)])
        await world.append(S, [e(n=3)], fence=f)  # the prompt did not disturb the fence
        f2 = await world.acquire(S)
        await world.append(S, [e("prompt", n=4)])  # nor does a takeover refuse prompts
        log = await all_entries(world, S)
        assert [(x.kind, x.epoch) for x in log] == [
            ("prompt", None),
            ("fence", f.epoch),
            ("msg", f.epoch),
            ("prompt", None),
            ("msg", f.epoch),
            ("fence", f2.epoch),
            ("prompt", None),
        ]

    # -- W4 atomic, dense, ordered -------------------------------------------------

    async def test_W4_batch_lands_at_consecutive_positions_and_returns_last_seq(
        self, world: World
    ) -> None:
        assert await world.append(S, [e(n=i) for i in range(3)]) == 3
        assert await world.append(S, [e(n=3)]) == 4
        assert await world.append(S, [e(n=i) for i in range(4, 9)]) == 9
        log = await all_entries(world, S)
        assert [x.seq for x in log] == list(range(1, 10))
        assert [x.data["n"] for x in log] == list(range(9))
        assert all(x.session_id == S for x in log)

    async def test_W4_concurrent_batches_never_interleave(self, world: World) -> None:
        async def batch(b: int) -> int:
            return await world.append(S, [e(b=b, i=i) for i in range(5)])

        lasts = await asyncio.gather(*(batch(b) for b in range(20)))
        log = await all_entries(world, S)
        assert [x.seq for x in log] == list(range(1, 101))
        for b, last in enumerate(lasts):
            chunk = log[last - 5 : last]
            assert [(x.data["b"], x.data["i"]) for x in chunk] == [(b, i) for i in range(5)]

    async def test_W4_stored_data_is_exactly_what_was_given(self, world: World) -> None:
        data: dict[str, Any] = {
            "text": "héllo ✓ \u0000 \"quoted\" 'single' \\ back",
            "n": 12345678901234567,
            "neg": -1,
            "f": 0.1,
            "big": 1e300,
            "t": True,
            "none": None,
            "list": [1, "two", [3], {"four": 4}],
            "nested": {"a": {"b": {"c": []}}},
            "": "empty key",
        }
        await world.append(S, [NewEntry("k" * 64, data), NewEntry("x", {})])
        log = await world.read(S)
        assert log[0].data == data and log[0].kind == "k" * 64
        assert log[1].data == {}
        assert isinstance(log[0].at, datetime) and log[0].at.tzinfo is not None
        assert abs((datetime.now(UTC) - log[0].at).total_seconds()) < 60
        # Changing what we gave or what we got never changes what is stored.
        data["n"] = 0
        log[0].data["text"] = "changed"
        assert (await world.read(S))[0].data["text"].startswith("héllo")
        assert (await world.read(S))[0].data["n"] == 12345678901234567

    async def test_W4_a_batch_with_one_bad_entry_writes_nothing(self, world: World) -> None:
        _, before = await seed(world)
        with pytest.raises(InvalidEntry):
            await world.append(S, [e(n=1), NewEntry("bad", {"x": float("nan")})], wake=0)
        with pytest.raises(InvalidEntry):
            await world.append(S, [e(n=1), NewEntry("fence", {})])
        assert await snapshot(world) == before
        await no_wake(world)

    # -- W5 expect -----------------------------------------------------------------

    async def test_W5_expect_appends_only_at_the_expected_position(self, world: World) -> None:
        assert await world.append(S, [e(n=1)], expect=0) == 1
        assert await world.append(S, [e(n=2), e(n=3)], expect=1) == 3
        for wrong in (0, 2, 4, 100):
            with pytest.raises(Conflict) as info:
                await world.append(S, [e(n=9)], expect=wrong, wake=0)
            assert info.value.last == 3
            assert info.value.expected == wrong
            assert info.value.session_id == S
        assert [x.data["n"] for x in await all_entries(world, S)] == [1, 2, 3]
        await no_wake(world)

    async def test_W5_expect_with_a_fence(self, world: World) -> None:
        f = await world.acquire(S)
        with pytest.raises(Conflict) as info:
            await world.append(S, [e()], fence=f, expect=0)
        assert info.value.last == 1
        assert await world.append(S, [e()], fence=f, expect=1) == 2
        # The fence is checked before expect.
        await world.acquire(S)
        with pytest.raises(Fenced):
            await world.append(S, [e()], fence=f, expect=0)

    async def test_W5_racing_expects_let_exactly_one_win(self, world: World) -> None:
        await world.append(S, [e()])
        results = await asyncio.gather(
            *(world.append(S, [e(w=w)], expect=1) for w in range(8)), return_exceptions=True
        )
        wins = [r for r in results if isinstance(r, int)]
        assert wins == [2]
        assert all(isinstance(r, Conflict) for r in results if not isinstance(r, int))
        assert len(await all_entries(world, S)) == 2

    # -- W6 idempotency key --------------------------------------------------------

    async def test_W6_a_repeated_key_returns_the_first_seq_and_writes_nothing(
        self, world: World
    ) -> None:
        first = await world.append(S, [e(n=1), e(n=2)], key="prompt-1")
        await world.append(S, [e(n=3)])
        again = await world.append(S, [e(n=99), e(n=98)], key="prompt-1")
        assert first == again == 2
        assert [x.data["n"] for x in await all_entries(world, S)] == [1, 2, 3]
        assert await world.append(S, [e(n=4)], key="prompt-2") == 4

    async def test_W6_key_is_checked_before_fence_and_expect(self, world: World) -> None:
        f = await world.acquire(S)
        landed = await world.append(S, [e(n=1)], fence=f, key="step-1")
        await world.acquire(S)  # f is stale now, and the log has grown
        assert await world.append(S, [e(n=1)], fence=f, key="step-1") == landed
        assert await world.append(S, [e(n=1)], fence=f, key="step-1", expect=0) == landed
        with pytest.raises(Fenced):  # a new key with the stale fence is refused
            await world.append(S, [e(n=2)], fence=f, key="step-2")
        with pytest.raises(Conflict):
            await world.append(S, [e(n=2)], key="step-3", expect=0)
        # Refused calls did not record their keys.
        assert await world.append(S, [e(n=3)], key="step-3") == 4

    async def test_W6_keys_are_per_session(self, world: World) -> None:
        assert await world.append(S, [e()], key="k") == 1
        assert await world.append(OTHER, [e(), e()], key="k") == 2
        assert len(await world.read(OTHER)) == 2

    async def test_W6_concurrent_retries_with_one_key_land_once(self, world: World) -> None:
        results = await asyncio.gather(
            *(world.append(S, [e(n=1), e(n=2)], key="retry") for _ in range(10))
        )
        assert set(results) == {2}
        assert len(await all_entries(world, S)) == 2

    async def test_W6_a_keyed_repeat_owes_no_wake(self, world: World) -> None:
        await world.append(S, [e()], key="p", wake=0)
        lease = await world.take_wake(lease=5)
        assert lease is not None and lease.session_id == S
        await world.finish_wake(lease)
        await world.append(S, [e()], key="p", wake=0)
        await no_wake(world)

    # -- W8 epoch-monotone log -----------------------------------------------------

    async def test_W8_a_replaced_writer_never_lands_after_its_successor(self, world: World) -> None:
        writers = [await world.acquire(S)]
        await world.append(S, [e(w=0)], fence=writers[0])
        for w in range(1, 5):
            writers.append(await world.acquire(S))
            await world.append(S, [e("prompt")])
            for old in writers[:-1]:
                with pytest.raises(Fenced):
                    await world.append(S, [e(w=-1)], fence=old)
            await world.append(S, [e(w=w), e(w=w)], fence=writers[-1])
        log = await all_entries(world, S)
        assert epochs_monotone(log)
        assert all(x.data.get("w") != -1 for x in log)

    async def test_W8_racing_writers_keep_the_log_epoch_monotone(self, world: World) -> None:
        async def writer(w: int) -> None:
            for _ in range(4):
                f = await world.acquire(S)
                for i in range(3):
                    try:
                        await world.append(S, [e(w=w, i=i)], fence=f)
                    except Fenced:
                        break
                    await asyncio.sleep(0)

        await asyncio.gather(*(writer(w) for w in range(4)))
        log = await all_entries(world, S)
        assert [x.seq for x in log] == list(range(1, len(log) + 1))
        assert epochs_monotone(log)

    # -- W9 read -------------------------------------------------------------------

    async def test_W9_read_returns_a_contiguous_slice_after_the_cursor(self, world: World) -> None:
        await world.append(S, [e(n=i) for i in range(1, 11)])
        assert [x.seq for x in await world.read(S)] == list(range(1, 11))
        assert [x.seq for x in await world.read(S, 3)] == list(range(4, 11))
        assert [x.seq for x in await world.read(S, 3, limit=4)] == [4, 5, 6, 7]
        assert [x.seq for x in await world.read(S, 9, limit=4)] == [10]
        assert await world.read(S, 10) == []
        assert await world.read(S, 1000) == []
        assert await world.read("never-written") == []

    async def test_W9_reads_never_see_holes_or_go_backwards(self, world: World) -> None:
        done = False

        async def writer() -> None:
            nonlocal done
            for b in range(30):
                await world.append(S, [e(b=b, i=i) for i in range(4)])
                await asyncio.sleep(0)
            done = True

        async def reader() -> list[int]:
            seen: list[int] = []
            while not done or len(seen) < 120:
                batch = await world.read(S, seen[-1] if seen else 0, limit=7)
                expected = list(range(len(seen) + 1, len(seen) + 1 + len(batch)))
                assert [x.seq for x in batch] == expected
                seen.extend(x.seq for x in batch)
                await asyncio.sleep(0)
            return seen

        _, seen = await asyncio.wait_for(asyncio.gather(writer(), reader()), 60)
        assert seen == list(range(1, 121))

    async def test_W9_refused_data_is_never_shown(self, world: World) -> None:
        f = await world.acquire(S)
        await world.acquire(S)
        with pytest.raises(Fenced):
            await world.append(S, [e(secret="refused")], fence=f)
        with pytest.raises(Conflict):
            await world.append(S, [e(secret="refused")], expect=0)
        assert all("secret" not in x.data for x in await all_entries(world, S))
