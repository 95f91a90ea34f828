"""Deliberately broken worlds: each breaks exactly one guarantee, and the kit must
fail each of them, naming that guarantee. They prove the kit has teeth.

Each is a :class:`~fxworld.embedded.memory.MemoryWorld` with one behaviour
changed. :data:`BROKEN` maps a name to ``(factory, guarantee broken, what)``;
``fxworld conformance --world fxworld_conformance.broken:stale_fence`` runs the
kit against one from the command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from fxworld import validate
from fxworld.embedded.memory import MemoryWorld
from fxworld.errors import BackendUnavailable, Fenced
from fxworld.follow import poll_follow
from fxworld.types import Entry, Fence, NewEntry, WakeLease

__all__ = ["BROKEN", "BrokenWorld"]


class BrokenWorld(MemoryWorld):
    """Base of the broken worlds; ``breaks`` names the guarantee broken, ``also``
    the guarantees the same bug necessarily breaks as well."""

    breaks: str = ""
    what: str = ""
    also: frozenset[str] = frozenset()


class _BentAppend(BrokenWorld):
    """A world whose ``append`` checks its arguments as a correct world does, then
    goes on with them changed by :meth:`bend`: the bug is what ``bend`` changes."""

    def bend(self, args: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

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
        validate.session_id(session_id)
        validate.entries(entries, max_bytes=self.max_entry_bytes)
        validate.append_args(session_id, fence=fence, expect=expect, key=key, wake=wake)
        args = self.bend({"fence": fence, "expect": expect, "key": key, "wake": wake})
        return await super().append(session_id, entries, **args)


class StaleFenceAccepted(BrokenWorld):
    breaks, what = "W2", "a stale fence is accepted (the append lands unfenced)"
    also = frozenset({"W14", "W8"})  # a fence from before a delete is stale too

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
        try:
            return await super().append(
                session_id, entries, fence=fence, expect=expect, key=key, wake=wake
            )
        except Fenced:
            return await super().append(session_id, entries, expect=expect, key=key, wake=wake)


class HoleFilledLate(BrokenWorld):
    breaks, what = "W9", "the first entry of each append becomes readable 0.3 s after the rest"
    also = frozenset({"W10"})  # follow() reads through the same holes

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._hidden: dict[tuple[str, int], float] = {}

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
        before = len(await super().read(session_id, 0, limit=10**9))
        seq = await super().append(
            session_id, entries, fence=fence, expect=expect, key=key, wake=wake
        )
        if seq > before:
            self._hidden[(session_id, before + 1)] = time.monotonic() + 0.3
        return seq

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        now = time.monotonic()
        got = await super().read(session_id, after, limit=limit)
        return [e for e in got if self._hidden.get((session_id, e.seq), 0) <= now]

    async def delete(self, session_id: str) -> None:
        await super().delete(session_id)
        self._hidden = {k: v for k, v in self._hidden.items() if k[0] != session_id}


class TornBatch(BrokenWorld):
    breaks, what = "W4", "a batch lands one entry at a time, so concurrent batches interleave"

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
        validate.entries(entries)
        if key is not None:  # keyed batches stay whole, so only W4 breaks
            return await super().append(
                session_id, entries, fence=fence, expect=expect, key=key, wake=wake
            )
        seq = 0
        for i, entry in enumerate(entries):
            last = i == len(entries) - 1
            seq = await super().append(
                session_id,
                [entry],
                fence=fence,
                expect=expect if i == 0 else None,
                key=key if last else None,
                wake=wake if last else None,
            )
            if not last:
                await asyncio.sleep(0)
        return seq


class KeyIgnored(_BentAppend):
    breaks, what = "W6", "the idempotency key is ignored: a retried call lands twice"

    def bend(self, args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "key": None}


class ExpectIgnored(_BentAppend):
    breaks, what = "W5", "expect= is ignored: no Conflict"
    also = frozenset({"W7"})  # the append that should be refused also enqueues its wake

    def bend(self, args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "expect": None}


class WakeEarly(_BentAppend):
    breaks, what = "W11", "a wake is delivered before its due time (the delay is ignored)"
    also = frozenset({"W7", "W13"})  # wakes from append(wake=) and re-wakes come early too

    async def wake(self, session_id: str, *, delay: float = 0.0) -> None:
        validate.delay(delay)
        await super().wake(session_id, delay=0.0)

    def bend(self, args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "wake": None if args["wake"] is None else 0.0}


class AppendWakeLost(_BentAppend):
    breaks, what = "W7", "append(wake=) writes the entries but enqueues no wake"

    def bend(self, args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "wake": None}


class RewakeLostOnFinish(BrokenWorld):
    breaks, what = "W13", "finish_wake removes the wake even when a wake() arrived during the lease"

    async def finish_wake(self, wake: WakeLease) -> None:
        await super().finish_wake(wake)
        self._wakes.pop(wake.session_id, None)  # the bug: the re-wake is dropped


class LeaseTwice(BrokenWorld):
    breaks, what = "W12", "a wake under a live lease is handed to a second worker"
    also = frozenset({"W11"})  # it hands out leased wakes that are not due again either

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._handed: list[WakeLease] = []

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        got = await super().take_wake(lease=lease)
        if got is not None:
            self._handed.append(got)
            return got
        now = time.time()
        for held in self._handed:
            if held.expires_at.timestamp() > now and held.session_id in self._wakes:
                return WakeLease(held.session_id, uuid.uuid4().hex, held.attempt, held.expires_at)
        return None


class EpochReused(BrokenWorld):
    breaks, what = "W1", "delete() resets the epoch counter, so epochs are handed out again"
    also = frozenset({"W14"})  # W14 repeats W1 for acquires after a delete

    async def delete(self, session_id: str) -> None:
        await super().delete(session_id)
        log = self._logs.get(session_id)
        if log is not None:
            log.epoch = 0


class DeleteKeepsWake(BrokenWorld):
    breaks, what = "W14", "delete() leaves the session's pending wake behind"

    async def delete(self, session_id: str) -> None:
        pending = session_id in self._wakes and self._wakes[session_id].token is None
        await super().delete(session_id)
        if pending:
            await self.wake(session_id)


class FollowSkipsFirst(BrokenWorld):
    breaks, what = "W10", "follow() skips the first entry after the cursor"
    also = frozenset({"W15"})  # and so takes a cursor of -1 for 0

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Entry]:
        return super().follow(session_id, after + 1)


class FollowIgnoresCancel(BrokenWorld):
    breaks, what = "W10", "follow() drops a cancel that arrives with the wake-up it waited for"

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Entry]:
        validate.session_id(session_id)
        validate.read_args(after, 1)
        return self._follow(session_id, after)

    async def _follow(self, sid: str, after: int) -> AsyncIterator[Entry]:
        cursor = after
        while True:
            batch = await self.read(sid, cursor)
            for entry in batch:
                cursor = entry.seq
                yield entry
            if not batch:
                waiting = self._changed.setdefault(sid, {})
                event = waiting.setdefault(asyncio.get_running_loop(), asyncio.Event())
                try:
                    await asyncio.wait_for(event.wait(), timeout=1.0)
                except TimeoutError:
                    pass
                except asyncio.CancelledError:
                    if not event.is_set():
                        raise
                    # the bug, on purpose on every Python (3.11's wait_for had it): the
                    # wake-up came with the cancel, and the cancel is dropped
                    task = asyncio.current_task()
                    if task is not None:
                        task.uncancel()


class FollowersHoldConnections(BrokenWorld):
    breaks, what = (
        "W10",
        (
            "a waiting follower holds one of the 100 pooled connections that every call needs "
            "(a blocking XREAD each), so 100 idle followers starve writers and workers"
        ),
    )

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._pool = asyncio.Semaphore(100)

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[None]:
        try:  # as a client pool that is full: wait 3 s, then fail
            await asyncio.wait_for(self._pool.acquire(), 3.0)
        except TimeoutError:
            raise BackendUnavailable("no free connection: 100 in use") from None
        try:
            yield
        finally:
            self._pool.release()

    async def _block(self) -> None:  # the follower's wait, on a connection of the pool
        async with self._connection():
            await asyncio.sleep(1.0)

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Entry]:
        validate.session_id(session_id)
        validate.read_args(after, 1)
        return poll_follow(self.read, session_id, after, changed=self._block)

    async def append(self, session_id: str, entries: Sequence[NewEntry], **kw: Any) -> int:
        async with self._connection():
            return await super().append(session_id, entries, **kw)

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        async with self._connection():
            return await super().read(session_id, after, limit=limit)

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        async with self._connection():
            return await super().take_wake(lease=lease)


class LeakyErrors(BrokenWorld):
    breaks, what = "W16", "reading an empty session raises a bare KeyError (a driver error leaks)"

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        got = await super().read(session_id, after, limit=limit)
        if not got and after == 0:
            raise KeyError(session_id)
        return got


class NoIdCheck(BrokenWorld):
    breaks, what = "W15", "session ids are not checked: 'a/../b' is silently rewritten and stored"

    @staticmethod
    def _clean(session_id: str) -> str:
        if isinstance(session_id, str) and session_id:
            return "".join(c if c.isalnum() or c in "._:-" else "_" for c in session_id)[:128]
        return session_id

    async def acquire(self, session_id: str) -> Fence:
        return await super().acquire(self._clean(session_id))

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
        sid = self._clean(session_id)
        if isinstance(fence, Fence) and fence.session_id == session_id:
            fence = Fence(sid, fence.epoch, fence.seq)
        return await super().append(sid, entries, fence=fence, expect=expect, key=key, wake=wake)

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        return await super().read(self._clean(session_id), after, limit=limit)


class CapabilitiesUndeclared(BrokenWorld):
    breaks, what = "W17", "capabilities is a list of made-up names, not a frozenset of known ones"

    capabilities = ["fast", "durable-ish"]  # type: ignore[assignment]  # noqa: RUF012


class BatchRetakesLeased(BrokenWorld):
    breaks, what = "W12", "take_wakes hands a leased session out again once a wake() came for it"

    async def take_wakes(self, *, lease: float, limit: int = 10) -> list[WakeLease]:
        taken = await super().take_wakes(lease=lease, limit=limit)
        now, have = time.time(), {t.session_id for t in taken}
        # the bug: a request that came during the lease is taken for a free wake
        again = [
            WakeLease(sid, uuid.uuid4().hex, w.attempt, datetime.fromtimestamp(now + lease, UTC))
            for sid, w in self._wakes.items()
            if sid not in have and w.token is not None and w.due is not None and w.due <= now
        ]
        return (taken + again)[:limit]


class EpochHandedOutAgain(BrokenWorld):
    breaks, what = "W1", "acquire hands out epoch 1 again, though it fenced the log at a newer one"
    # the fence it hands out is stale at once: writes under it are refused (W2, W3,
    # W8, W14, W18: the large values' scenarios write fenced too), and the Fenced
    # error names epoch 1 (W16)
    also = frozenset({"W2", "W3", "W8", "W14", "W16", "W18"})

    async def acquire(self, session_id: str) -> Fence:
        fence = await super().acquire(session_id)
        return Fence(fence.session_id, 1, fence.seq)  # the bug: epoch 1 again


class TakeWakeHangs(BrokenWorld):
    breaks, what = "W11", "take_wake never returns (as a client waiting on a lost reply)"
    # every check that takes a wake waits, and many take one to see that none is owed
    also = frozenset({"W2", "W4", "W5", "W6", "W7", "W12", "W13", "W14", "W15"})

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        validate.lease(lease)
        await asyncio.Event().wait()  # the bug: nothing ever sets it
        raise AssertionError("unreachable")


_LARGE = 1 << 20  # bytes of JSON over which the two worlds below treat a value as large


def _large(data: dict[str, Any]) -> bool:
    return len(json.dumps(data)) > _LARGE


def _half(entry: Entry) -> Entry:
    """``entry`` with the first half of each of its strings only."""
    data = {k: v[: len(v) // 2] if isinstance(v, str) else v for k, v in entry.data.items()}
    return replace(entry, data=data)


class TornLargeValue(BrokenWorld):
    breaks = "W18"
    what = "a large value is readable in pieces: for 0.3 s after its append, only its first half"
    also = frozenset({"W15"})  # the entry that just fits the size limit is large too

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._torn: dict[tuple[str, int], float] = {}

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
        seq = await super().append(
            session_id, entries, fence=fence, expect=expect, key=key, wake=wake
        )
        until = time.monotonic() + 0.3
        for i, entry in enumerate(entries):
            if _large(entry.data):
                self._torn[(session_id, seq - len(entries) + 1 + i)] = until
        return seq

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        now = time.monotonic()
        got = await super().read(session_id, after, limit=limit)
        return [_half(x) if self._torn.get((session_id, x.seq), 0) > now else x for x in got]

    async def delete(self, session_id: str) -> None:
        await super().delete(session_id)
        self._torn = {k: v for k, v in self._torn.items() if k[0] != session_id}


class LargeValueKeptAfterDelete(BrokenWorld):
    breaks = "W18"
    what = (
        "large values live in a blob area by position, created only if absent, and delete "
        "leaves them there: a new large value at a deleted one's position reads as the old"
    )

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._blobs: dict[tuple[str, int], dict[str, Any]] = {}

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
        seq = await super().append(
            session_id, entries, fence=fence, expect=expect, key=key, wake=wake
        )
        for i, entry in enumerate(entries):
            if _large(entry.data):
                self._blobs.setdefault((session_id, seq - len(entries) + 1 + i), dict(entry.data))
        return seq

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        got = await super().read(session_id, after, limit=limit)
        return [replace(x, data=self._blobs.get((session_id, x.seq), x.data)) for x in got]


class TakeReturnsOtherAgentsWake(BrokenWorld):
    breaks = "W19"
    what = "take_wakes_for ignores the agent: it hands out any due wake, another agent's too"

    async def take_wakes_for(self, agent: str, *, lease: float, limit: int = 10) -> list[WakeLease]:
        validate.agent_name(agent)
        return await self.take_wakes(lease=lease, limit=limit)


class TakeStarvesAnAgent(BrokenWorld):
    breaks = "W19"
    what = (
        "take_wakes_for looks only at the earliest `limit` due wakes of all agents and "
        "keeps its own: an agent whose wakes are behind another agent's finds none"
    )

    async def take_wakes_for(self, agent: str, *, lease: float, limit: int = 10) -> list[WakeLease]:
        name = validate.agent_name(agent)
        states = sorted(
            (s.due_at, s.session_id)
            for s in await self.list_wakes(limit=100_000)
            if s.leased_until is None and s.due_at <= datetime.now(UTC)
        )[: validate.wake_batch(limit)]
        mine = [sid for _, sid in states if await self.owner(sid) in (None, name)]
        if not mine:  # its own wakes are behind others': it sees none of them
            return []
        return await super().take_wakes_for(name, lease=lease, limit=len(mine))


_CLASSES: dict[str, type[BrokenWorld]] = {
    "stale_fence": StaleFenceAccepted,
    "hole_filled_late": HoleFilledLate,
    "torn_batch": TornBatch,
    "key_ignored": KeyIgnored,
    "expect_ignored": ExpectIgnored,
    "wake_early": WakeEarly,
    "append_wake_lost": AppendWakeLost,
    "rewake_lost_on_finish": RewakeLostOnFinish,
    "lease_twice": LeaseTwice,
    "epoch_reused": EpochReused,
    "delete_keeps_wake": DeleteKeepsWake,
    "follow_skips_first": FollowSkipsFirst,
    "follow_ignores_cancel": FollowIgnoresCancel,
    "followers_hold_connections": FollowersHoldConnections,
    "leaky_errors": LeakyErrors,
    "no_id_check": NoIdCheck,
    "capabilities_undeclared": CapabilitiesUndeclared,
    "batch_retakes_leased": BatchRetakesLeased,
    "epoch_handed_out_again": EpochHandedOutAgain,
    "take_wake_hangs": TakeWakeHangs,
    "torn_large_value": TornLargeValue,
    "large_value_kept_after_delete": LargeValueKeptAfterDelete,
    "take_returns_other_agents_wake": TakeReturnsOtherAgentsWake,
    "take_starves_an_agent": TakeStarvesAnAgent,
}

BROKEN: dict[str, tuple[Callable[[], BrokenWorld], str, str]] = {
    name: (cls, cls.breaks, cls.what) for name, cls in _CLASSES.items()
}
"""name -> (factory, the guarantee it breaks, how)."""


def __getattr__(name: str) -> Callable[[], BrokenWorld]:
    # ``fxworld_conformance.broken:stale_fence`` works as a factory spec.
    if name in BROKEN:
        return BROKEN[name][0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
