"""Example-based tests of every guarantee W1-W17, reusable by every backend.

A backend's test module subclasses :class:`GuaranteeTests` and overrides one
fixture, ``world``, which yields a fresh, set-up, empty world and closes it
afterwards::

    class TestMyWorld(GuaranteeTests):
        @pytest.fixture
        async def world(self) -> AsyncIterator[World]:
            w = MyWorld(...)
            await w.setup()
            yield w
            await w.close()

Each test is named after the guarantee it checks (``test_W5_...``). Timing-based
checks (due times, lease expiry) use short delays with generous margins; no test
asserts speed.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import reprlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from fxworld import Entry, Fence, NewEntry, WakeLease, World
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
from fxworld.protocol import CAPABILITIES, SessionLister
from fxworld.validate import DEFAULT_MAX_ENTRY_BYTES, MAX_SECONDS, MAX_SEQ

__all__ = ["GuaranteeTests"]

S = "s1"
OTHER = "s2"
LIVE = 5.0  # seconds: generous liveness timeout on a loaded machine

BAD_SESSION_IDS: list[Any] = [
    "../x",
    "a b",
    "{x}",
    "x" * 200,
    "x" * 129,
    "café",
    "",
    "a/b",
    "s1\n",
    123,
    None,
    b"s1",
]
RESERVED_KINDS = ["fence", "fence.x", "fencepost"]
BAD_KINDS: list[Any] = ["", "k" * 65, 5, None]
NON_OBJECT_DATA: list[Any] = [[], [1, 2], "text", None, 5, 1.5, True]
NON_JSON_DATA: list[Any] = [
    {"a": object()},
    {"a": {1, 2}},
    {"a": b"bytes"},
    {"a": float("nan")},
    {"a": float("inf")},
    {"a": {"deep": float("-inf")}},
    {"a": (1, 2)},
    {1: "int key"},
    {(1, 2): "tuple key"},
    {"a": datetime(2020, 1, 1)},
    functools.reduce(lambda inner, _: {"a": inner}, range(5000), {}),  # nested too deeply
]
BAD_ENTRY_LISTS: list[Any] = [[], "abc", NewEntry("k", {}), [("k", {})], [{"kind": "k"}]]
# 2**64 and 1e300 fit no backend's integer or timestamp: refused, never a driver error
BAD_EXPECTS: list[Any] = [-1, 1.5, "3", True, 2**64]
BAD_LIMITS: list[Any] = [0, -1, 1.5, "10", True, 2**64]
BAD_AFTERS: list[Any] = [-1, 1.5, "1", 2**64]
BAD_DELAYS: list[Any] = [-1, -0.001, float("nan"), float("inf"), "1", True, 1e300]
BAD_LEASES: list[Any] = [0, -1, float("nan"), float("inf"), "1", False, 1e300]
BAD_KEYS: list[Any] = ["", "k" * 257, 5]


def e(kind: str = "msg", **data: Any) -> NewEntry:
    return NewEntry(kind, data)


async def all_entries(world: World, sid: str) -> list[Entry]:
    out: list[Entry] = []
    while True:
        batch = await world.read(sid, out[-1].seq if out else 0)
        if not batch:
            return out
        out.extend(batch)


def view(entries: list[Entry]) -> list[tuple[int, str, dict[str, Any], int | None]]:
    """What a log shows, without commit times."""
    return [(x.seq, x.kind, x.data, x.epoch) for x in entries]


async def snapshot(world: World) -> tuple[object, ...]:
    """Everything the tests seeded, as a comparable value."""
    logs = (view(await all_entries(world, S)), view(await all_entries(world, OTHER)))
    listed = await world.list_sessions() if isinstance(world, SessionLister) else None
    return (logs, listed)


async def seed(world: World) -> tuple[Fence, tuple[object, ...]]:
    """A session with a fence and a few entries, and no wake pending."""
    fence = await world.acquire(S)
    await world.append(S, [e(n=1), e(n=2)], fence=fence, key="seed-1")
    await world.append(S, [e("prompt", text="hi")])
    return fence, await snapshot(world)


async def no_wake(world: World) -> None:
    lease = await world.take_wake(lease=5)
    assert lease is None, f"a wake was enqueued: {lease}"


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


async def take_unless_early(world: World, since: float, due_in: float) -> WakeLease | None:
    """``take_wake``, failing if it hands out a wake before ``due_in`` seconds after
    ``since`` (a ``time.monotonic()`` read before the call that set the due time).

    On a loaded machine the call may end after the due time; then a lease is
    legitimate, so the check never fails falsely.
    """
    lease = await world.take_wake(lease=5)
    if lease is not None:
        elapsed = time.monotonic() - since
        assert elapsed >= due_in, f"{lease} delivered {elapsed:.3f}s in, due at {due_in}s"
    return lease


async def take_when_due(world: World, lease: WakeLease | None, wait: float) -> WakeLease:
    """``lease`` if already taken, else the wake taken after ``wait`` seconds."""
    if lease is None:
        await asyncio.sleep(wait)
        lease = await world.take_wake(lease=5)
    assert lease is not None, "a due wake was not delivered"
    return lease


def too_slow(since: float, budget: float) -> None:
    """Skip a timing check the machine was too loaded to make meaningful."""
    if time.monotonic() - since >= budget:
        pytest.skip(f"the machine took over {budget}s for a step that needed less")


def epochs_monotone(entries: list[Entry]) -> bool:
    epochs = [x.epoch for x in entries if x.epoch is not None]
    return all(a <= b for a, b in itertools.pairwise(epochs))


class GuaranteeTests:
    """W1-W17, example-based. Override the ``world`` fixture."""

    secrets: tuple[str, ...] = ()
    """Strings (passwords) that must never appear in a repr or an error message."""

    @pytest.fixture
    async def world(self) -> AsyncIterator[World]:
        raise NotImplementedError("a backend's test class overrides the `world` fixture")
        yield  # pragma: no cover

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

    # -- W7 append + wake ----------------------------------------------------------

    async def test_W7_append_with_wake_enqueues_a_wake(self, world: World) -> None:
        await no_wake(world)
        seq = await world.append(S, [e("prompt")], wake=0)
        lease = await world.take_wake(lease=5)
        assert lease is not None
        assert (lease.session_id, lease.attempt) == (S, 1)
        assert seq == 1

    async def test_W7_append_with_a_delayed_wake_is_due_later(self, world: World) -> None:
        t0 = time.monotonic()
        await world.append(S, [e()], wake=0.6)
        lease = await take_unless_early(world, t0, 0.6)
        lease = await take_when_due(world, lease, 0.9)
        assert lease.session_id == S

    async def test_W7_a_refused_append_owes_no_wake(self, world: World) -> None:
        old = await world.acquire(S)
        await world.acquire(S)
        with pytest.raises(Fenced):
            await world.append(S, [e()], fence=old, wake=0)
        with pytest.raises(Conflict):
            await world.append(S, [e()], expect=0, wake=0)
        with pytest.raises(InvalidEntry):
            await world.append(S, [NewEntry("fence", {})], wake=0)
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

    # -- W10 follow ----------------------------------------------------------------

    async def test_W10_follow_yields_the_past_then_new_entries_in_order_once(
        self, world: World
    ) -> None:
        await world.append(S, [e(n=1), e(n=2)])
        it = world.follow(S)
        got = [await asyncio.wait_for(anext(it), LIVE) for _ in range(2)]
        assert [x.data["n"] for x in got] == [1, 2]
        nxt = asyncio.ensure_future(asyncio.wait_for(anext(it), LIVE))
        await asyncio.sleep(0.05)
        assert not nxt.done()  # nothing new yet: follow waits
        await world.append(S, [e(n=3), e(n=4)])
        got.append(await nxt)
        got.append(await asyncio.wait_for(anext(it), LIVE))
        assert [x.seq for x in got] == [1, 2, 3, 4]
        await it.aclose()  # type: ignore[attr-defined]

    async def test_W10_reconnecting_from_the_last_seq_has_no_gap_or_duplicate(
        self, world: World
    ) -> None:
        await world.append(S, [e(n=i) for i in range(1, 6)])
        seen: list[int] = []
        for _ in range(3):
            it = world.follow(S, seen[-1] if seen else 0)
            seen.append((await asyncio.wait_for(anext(it), LIVE)).seq)
            seen.append((await asyncio.wait_for(anext(it), LIVE)).seq)
            await it.aclose()  # type: ignore[attr-defined]
            await world.append(S, [e()])
        assert seen == [1, 2, 3, 4, 5, 6]

    async def test_W10_follow_sees_concurrent_writers_without_gaps(self, world: World) -> None:
        async def writer(w: int) -> None:
            for i in range(10):
                await world.append(S, [e(w=w, i=i), e(w=w, i=i)])
                await asyncio.sleep(0.001)

        async def follower() -> list[int]:
            seqs: list[int] = []
            async for entry in world.follow(S):
                seqs.append(entry.seq)
                if len(seqs) == 60:
                    break
            return seqs

        task = asyncio.ensure_future(asyncio.wait_for(follower(), 30))
        await asyncio.gather(*(writer(w) for w in range(3)))
        assert await task == list(range(1, 61))

    # -- W11 wake coalescing -------------------------------------------------------

    async def test_W11_wakes_of_one_session_coalesce(self, world: World) -> None:
        await world.wake(S)
        await world.wake(S)
        await world.append(S, [e()], wake=0)
        lease = await world.take_wake(lease=5)
        assert lease is not None and lease.session_id == S
        assert await world.take_wake(lease=5) is None
        await world.finish_wake(lease)
        await no_wake(world)

    async def test_W11_coalescing_keeps_the_earlier_due_time(self, world: World) -> None:
        await world.wake(S, delay=3600)
        await world.wake(S, delay=0)
        lease = await world.take_wake(lease=5)
        assert lease is not None and lease.session_id == S
        await world.wake(OTHER, delay=0)
        await world.wake(OTHER, delay=3600)
        lease2 = await world.take_wake(lease=5)
        assert lease2 is not None and lease2.session_id == OTHER

    async def test_W11_a_wake_is_never_delivered_before_its_due_time(self, world: World) -> None:
        t0 = time.monotonic()
        await world.wake(S, delay=0.6)
        await world.wake(OTHER, delay=3600)
        lease = await take_unless_early(world, t0, 0.6)
        if lease is None:
            await asyncio.sleep(0.2)
            lease = await take_unless_early(world, t0, 0.6)
        lease = await take_when_due(world, lease, 0.7)
        assert lease.session_id == S
        assert await world.take_wake(lease=5) is None  # OTHER is an hour away

    async def test_W11_each_session_has_its_own_wake(self, world: World) -> None:
        sessions = [f"s{i}" for i in range(5)]
        for sid in sessions:
            await world.wake(sid)
        taken = [await world.take_wake(lease=5) for _ in range(5)]
        assert sorted(t.session_id for t in taken if t is not None) == sessions
        assert await world.take_wake(lease=5) is None

    # -- W12 lease -----------------------------------------------------------------

    async def test_W12_take_wake_gives_none_when_nothing_is_due(self, world: World) -> None:
        assert await world.take_wake(lease=5) is None
        await world.append(S, [e()])  # an append without wake= owes no wake
        assert await world.take_wake(lease=5) is None

    async def test_W12_a_leased_wake_goes_to_one_taker(self, world: World) -> None:
        await world.wake(S)
        leases = await asyncio.gather(*(world.take_wake(lease=5) for _ in range(6)))
        got = [x for x in leases if x is not None]
        assert len(got) == 1
        assert got[0].session_id == S and got[0].attempt == 1
        assert got[0].expires_at > datetime.now(UTC)

    async def test_W12_an_expired_lease_is_delivered_again_with_attempt_plus_one(
        self, world: World
    ) -> None:
        await world.wake(S)
        t0 = time.monotonic()
        first = await world.take_wake(lease=0.3)
        assert first is not None and first.attempt == 1
        second = await take_unless_early(world, t0, 0.3)  # nobody else while it lasts
        second = await take_when_due(world, second, 0.6)
        assert (second.session_id, second.attempt) == (S, 2)
        assert second.token != first.token
        with pytest.raises(LeaseLost):
            await world.renew_wake(first, lease=5)
        with pytest.raises(LeaseLost):
            await world.finish_wake(first)
        # The stale holder changed nothing: the new delivery is intact.
        renewed = await world.renew_wake(second, lease=5)
        await world.finish_wake(renewed)
        await no_wake(world)

    async def test_W12_renew_extends_the_lease(self, world: World) -> None:
        await world.wake(S)
        t0 = time.monotonic()
        lease = await world.take_wake(lease=0.5)
        assert lease is not None
        try:
            renewed = await world.renew_wake(lease, lease=30)
        except LeaseLost:
            too_slow(t0, 0.5)
            raise
        assert renewed.session_id == S and renewed.token == lease.token
        assert renewed.attempt == lease.attempt
        assert renewed.expires_at > lease.expires_at
        await asyncio.sleep(0.8)
        assert await world.take_wake(lease=5) is None  # still held
        await world.finish_wake(renewed)

    async def test_W12_renew_or_finish_after_expiry_raise_lease_lost(self, world: World) -> None:
        await world.wake(S)
        lease = await world.take_wake(lease=0.2)
        assert lease is not None
        await asyncio.sleep(0.5)
        with pytest.raises(LeaseLost):
            await world.renew_wake(lease, lease=5)
        with pytest.raises(LeaseLost):
            await world.finish_wake(lease)
        again = await world.take_wake(lease=5)  # the wake was not lost
        assert again is not None and again.session_id == S and again.attempt == 2

    async def test_W12_a_forged_token_is_refused(self, world: World) -> None:
        await world.wake(S)
        lease = await world.take_wake(lease=5)
        assert lease is not None
        forged = WakeLease(S, "0" * 32, lease.attempt, lease.expires_at)
        with pytest.raises(LeaseLost):
            await world.renew_wake(forged, lease=5)
        with pytest.raises(LeaseLost):
            await world.finish_wake(forged)
        with pytest.raises(LeaseLost):
            await world.finish_wake(WakeLease(OTHER, lease.token, 1, lease.expires_at))
        await world.finish_wake(lease)

    # -- W13 finish ----------------------------------------------------------------

    async def test_W13_finish_removes_the_wake(self, world: World) -> None:
        await world.wake(S)
        t0 = time.monotonic()
        lease = await world.take_wake(lease=0.3)
        assert lease is not None
        try:
            await world.finish_wake(lease)
        except LeaseLost:
            too_slow(t0, 0.3)
            raise
        await asyncio.sleep(0.5)  # not delivered again after the lease would have ended
        await no_wake(world)
        with pytest.raises(LeaseLost):
            await world.finish_wake(lease)

    async def test_W13_a_wake_during_the_lease_keeps_the_session_due(self, world: World) -> None:
        await world.wake(S)
        lease = await world.take_wake(lease=5)
        assert lease is not None
        await world.append(S, [e("prompt")], wake=0)  # a prompt arrives while it runs
        assert await world.take_wake(lease=5) is None  # still leased
        await world.finish_wake(lease)
        again = await world.take_wake(lease=5)
        assert again is not None
        assert (again.session_id, again.attempt) == (S, 1)
        await world.finish_wake(again)
        await no_wake(world)

    async def test_W13_a_later_request_keeps_its_own_due_time(self, world: World) -> None:
        await world.wake(S)
        lease = await world.take_wake(lease=5)
        assert lease is not None
        t0 = time.monotonic()
        await world.wake(S, delay=0.6)
        await world.finish_wake(lease)
        again = await take_unless_early(world, t0, 0.6)  # not before its due time
        again = await take_when_due(world, again, 0.9)
        assert again.session_id == S and again.attempt == 1

    async def test_W13_an_expired_lease_redelivery_covers_a_later_request(
        self, world: World
    ) -> None:
        await world.wake(S)
        first = await world.take_wake(lease=0.2)
        assert first is not None
        await world.wake(S)
        await asyncio.sleep(0.4)
        second = await world.take_wake(lease=5)
        assert second is not None and second.session_id == S
        await world.finish_wake(second)
        await no_wake(world)

    # -- W14 delete ----------------------------------------------------------------

    async def test_W14_delete_removes_log_keys_and_wake(self, world: World) -> None:
        f = await world.acquire(S)
        await world.append(S, [e(n=1)], fence=f, key="k", wake=0)
        await world.append(OTHER, [e(n=1)])
        await world.delete(S)
        assert await world.read(S) == []
        await no_wake(world)
        # The key is gone: the same key appends anew, from seq 1.
        assert await world.append(S, [e(n=2)], key="k") == 1
        assert [x.data for x in await world.read(S)] == [{"n": 2}]
        # Another session is untouched.
        assert [x.data for x in await world.read(OTHER)] == [{"n": 1}]

    async def test_W14_old_fences_are_refused_after_delete(self, world: World) -> None:
        f = await world.acquire(S)
        await world.delete(S)
        with pytest.raises(Fenced):
            await world.append(S, [e()], fence=f)
        assert await world.read(S) == []
        f2 = await world.acquire(S)
        assert f2.epoch > f.epoch and f2.seq == 1
        with pytest.raises(Fenced):
            await world.append(S, [e()], fence=f)
        assert await world.append(S, [e()], fence=f2) == 2

    async def test_W14_delete_of_a_leased_wake_and_unknown_session(self, world: World) -> None:
        await world.delete("never-written")
        await world.wake(S)
        lease = await world.take_wake(lease=5)
        assert lease is not None
        await world.delete(S)
        with pytest.raises(LeaseLost):
            await world.finish_wake(lease)
        await no_wake(world)

    async def test_W14_deleted_session_leaves_the_listing(self, world: World) -> None:
        if not isinstance(world, SessionLister):
            pytest.skip("world does not list sessions")
        await world.append(S, [e()])
        await world.append(OTHER, [e()])
        assert await world.list_sessions() == [S, OTHER]
        await world.delete(S)
        assert await world.list_sessions() == [OTHER]

    # -- W15 bad input -------------------------------------------------------------

    @pytest.mark.parametrize("bad", BAD_SESSION_IDS, ids=repr)
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

    @pytest.mark.parametrize("kind", RESERVED_KINDS + BAD_KINDS, ids=repr)
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

    @pytest.mark.parametrize("data", NON_JSON_DATA, ids=lambda d: reprlib.repr(d))
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

    @pytest.mark.parametrize("key", BAD_KEYS, ids=lambda k: repr(k)[:12])
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

    # -- W16 errors ----------------------------------------------------------------

    async def test_W16_one_error_hierarchy(self, world: World) -> None:
        for cls in (
            Fenced,
            Conflict,
            LeaseLost,
            InvalidSessionId,
            InvalidEntry,
            EntryTooLarge,
            InvalidArgument,
            BackendUnavailable,
            ConfigurationError,
        ):
            assert issubclass(cls, WorldError)
        for cls in (InvalidSessionId, InvalidEntry, EntryTooLarge, InvalidArgument):
            assert issubclass(cls, ValueError)
        assert issubclass(BackendUnavailable, ConnectionError)
        # What the world raises is of that hierarchy, with readable messages.
        raised: list[WorldError] = []
        f = await world.acquire(S)
        await world.acquire(S)
        for call in (
            lambda: world.append(S, [e()], fence=f),
            lambda: world.append(S, [e()], expect=0),
            lambda: world.append("../x", [e()]),
            lambda: world.append(S, [NewEntry("fence", {})]),
            lambda: world.read(S, limit=0),
        ):
            with pytest.raises(WorldError) as info:
                await call()
            raised.append(info.value)
        assert [type(x) for x in raised] == [
            Fenced,
            Conflict,
            InvalidSessionId,
            InvalidEntry,
            InvalidArgument,
        ]
        for err in raised:
            assert str(err)
            for secret in self.secrets:
                assert secret not in str(err) and secret not in repr(err)

    async def test_W16_no_credentials_in_the_repr(self, world: World) -> None:
        text = repr(world) + str(world)
        for secret in self.secrets:
            assert secret not in text

    # -- W17 capabilities ----------------------------------------------------------

    async def test_W17_capabilities_are_declared_with_known_names(self, world: World) -> None:
        caps = world.capabilities
        assert isinstance(caps, frozenset)
        assert caps <= set(CAPABILITIES), caps - set(CAPABILITIES)
        assert isinstance(world, World)

    # -- optional: listing ---------------------------------------------------------

    async def test_list_sessions_pages_in_ascending_order(self, world: World) -> None:
        if not isinstance(world, SessionLister):
            pytest.skip("world does not list sessions")
        ids = ["b", "a", "c:1", "A", "z-9", "m.x"]
        for sid in ids:
            await world.append(sid, [e()])
        await world.acquire("fenced-only")
        await world.append("gone", [e()])
        await world.delete("gone")
        expected = sorted([*ids, "fenced-only"])
        assert await world.list_sessions() == expected
        page1 = await world.list_sessions(limit=3)
        page2 = await world.list_sessions(after=page1[-1], limit=3)
        page3 = await world.list_sessions(after=page2[-1], limit=3)
        assert page1 + page2 + page3 == expected
        assert await world.list_sessions(after=expected[-1]) == []
