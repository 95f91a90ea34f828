"""W7, W11-W13: append + wake, coalescing and due times, leases, finish.

A mixin of :class:`fxworld_conformance.examples.AsyncExamples`: each test takes
the ``world`` fixture (a fresh, set-up, empty world)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from fxworld import NewEntry, WakeLease, World, open_world
from fxworld.errors import (
    Conflict,
    Fenced,
    InvalidEntry,
    LeaseLost,
)
from fxworld_conformance.examples._support import (
    LIVE,
    OTHER,
    S,
    e,
    no_wake,
    take_unless_early,
    take_when_due,
    too_slow,
)


class WakeExamples:
    """W7, W11-W13."""

    secrets: tuple[str, ...] = ()
    world_url: str | None = None
    """The URL of the example's world, namespace included, when the suite opened it by
    URL: a second world opened on it shares the storage, as another process would."""

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

    async def test_W13_a_redelivery_covers_a_request_not_yet_due(self, world: World) -> None:
        """A request made during a lease that then expired, due only after the
        redelivery is taken: the redelivery covers it (W13: only a request after the
        take keeps the session due), so once it is finished nothing is left, not even
        when that request's due time comes."""
        await world.wake(S)
        first = await world.take_wake(lease=0.2)
        assert first is not None
        await world.wake(S, delay=1.2)
        await asyncio.sleep(0.4)
        second = await world.take_wake(lease=5)
        assert second is not None and (second.session_id, second.attempt) == (S, 2)
        await world.finish_wake(second)
        await asyncio.sleep(1.2)  # past the request's due time
        await no_wake(world)

    async def test_W11_a_take_covers_an_append_wake_of_a_writer_paused_after_it_returned(
        self, world: World
    ) -> None:
        """Another process's ``append(wake=1)`` returns while the session is due
        already, and that process stops at once (as a process the OS stopped). A take
        in this process leases the session: the append came before the take, so
        the take covers its request too (W11: the earlier due time is kept). Once the
        lease is finished nothing is left, not when the writer runs on, nor when the
        append's due time comes (process tier, S3: delivered again then, attempt 1)."""
        await world.wake(S)
        async with _append_then_pause(self.world_url, world, S, wake=1.0):
            lease = await world.take_wake(lease=5)
            assert lease is not None and (lease.session_id, lease.attempt) == (S, 1)
        await world.finish_wake(lease)
        await asyncio.sleep(1.2)  # past the append's due time
        await no_wake(world)


@contextlib.asynccontextmanager
async def _append_then_pause(
    url: str | None, world: World, sid: str, *, wake: float
) -> AsyncIterator[None]:
    """``append(sid, [e()], wake=wake)`` by a second world opened on ``url`` (if
    ``world`` is shared), in a thread and event loop of its own that then stand
    still until the block ends: what that world does in the background after the
    call returned waits meanwhile. Then it runs on and is closed. A world that is
    not shared (or has no URL) appends itself, and nothing pauses."""
    if url is None or "shared" not in getattr(world, "capabilities", ()):
        await world.append(sid, [e()], wake=wake)
        yield
        return
    appended, resume = threading.Event(), threading.Event()

    async def writer() -> None:
        other = open_world(url)
        await other.setup()
        try:
            await other.append(sid, [e()], wake=wake)
            appended.set()
            resume.wait(LIVE * 6)  # blocks this event loop: the process is stopped
        finally:
            await other.close()

    running = asyncio.ensure_future(asyncio.to_thread(asyncio.run, writer()))
    try:
        while not appended.is_set():
            if running.done():
                running.result()  # the writer failed: its error
            await asyncio.sleep(0.005)
        yield
    finally:
        resume.set()
        await running
