"""MemoryWorld: the whole World contract in one process's memory.

URL: ``memory://`` (``?namespace=`` accepted; every MemoryWorld is its own store).
Capabilities: ``push_follow`` only. Not ``durable`` (gone with the process) and not
``shared`` (other processes cannot see it). Safe for concurrent tasks on one event
loop; every method completes without awaiting in between, so each call is atomic.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import heapq
import json
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from fxworld import validate
from fxworld.errors import ConfigurationError, Conflict, Fenced, LeaseLost
from fxworld.follow import poll_follow
from fxworld.types import Entry, Fence, NewEntry, WakeLease, WakeState
from fxworld.urls import split_query

__all__ = ["MemoryWorld"]


@dataclass
class _Log:
    entries: list[Entry] = field(default_factory=list)
    epoch: int = 0  # the newest epoch ever handed out (or burnt by delete)
    keys: dict[str, int] = field(default_factory=dict)


@dataclass
class _Wake:
    due: float | None  # None: no request pending beyond the one being handled
    gen: int = 1  # grows with every wake() request
    attempt: int = 0
    token: str | None = None
    lease_until: float | None = None
    taken_gen: int = 0


class MemoryWorld:
    """A World in this process's memory; the kit's first target and the test double
    of choice for code that uses fxworld."""

    capabilities: frozenset[str] = frozenset({"push_follow"})

    def __init__(
        self, *, namespace: str = "default", max_entry_bytes: int = validate.DEFAULT_MAX_ENTRY_BYTES
    ) -> None:
        self.namespace = validate.namespace(namespace)
        self.max_entry_bytes = validate.max_entry_bytes(max_entry_bytes)
        self._logs: dict[str, _Log] = {}
        self._wakes: dict[str, _Wake] = {}
        self._owners: dict[str, str] = {}  # session id -> its agent (AgentRouter, W19)
        # Followers waiting for a session's next entry, one event per event loop: a
        # world may outlive a loop (a module-level world under pytest, asyncio.run
        # called twice), and an event may only be awaited in one loop.
        self._changed: dict[str, dict[asyncio.AbstractEventLoop, asyncio.Event]] = {}

    @classmethod
    def from_url(cls, url: str) -> MemoryWorld:
        """``memory://`` with optional ``?namespace=&max_entry_bytes=``."""
        _, params = split_query(url)
        unknown = sorted(set(params) - {"namespace", "max_entry_bytes"})
        if unknown:
            raise ConfigurationError(
                f"unknown memory URL parameter(s) {', '.join(unknown)}; "
                "known: namespace, max_entry_bytes"
            )
        limit = validate.max_entry_bytes(
            params.get("max_entry_bytes", validate.DEFAULT_MAX_ENTRY_BYTES)
        )
        return cls(namespace=params.get("namespace", "default"), max_entry_bytes=limit)

    def __repr__(self) -> str:
        return f"MemoryWorld(namespace={self.namespace!r})"

    async def setup(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def acquire(self, session_id: str) -> Fence:
        validate.session_id(session_id)
        log = self._logs.setdefault(session_id, _Log())
        log.epoch += 1
        seq = self._land(
            session_id, log, [(validate.FENCE_KIND, json.dumps({"epoch": log.epoch}))], log.epoch
        )
        return Fence(session_id, log.epoch, seq)

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
        _, encoded = validate.append(
            session_id,
            entries,
            fence=fence,
            expect=expect,
            key=key,
            wake=wake,
            max_bytes=self.max_entry_bytes,
        )
        log = self._logs.get(session_id) or _Log()
        if key is not None and key in log.keys:
            return log.keys[key]
        if fence is not None and fence.epoch != log.epoch:
            raise Fenced(session_id, fence.epoch, log.epoch)
        last = len(log.entries)
        if expect is not None and expect != last:
            raise Conflict(session_id, expect, last)
        self._logs[session_id] = log
        seq = self._land(session_id, log, encoded, fence.epoch if fence else None)
        if key is not None:
            log.keys[key] = seq
        if wake is not None:
            self._wake(session_id, wake)
        return seq

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        validate.session_id(session_id)
        validate.read_args(after, limit)
        log = self._logs.get(session_id)
        if log is None:
            return []
        return [_copy(e) for e in log.entries[after : after + limit]]

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Entry]:
        validate.session_id(session_id)
        validate.read_args(after, 1)
        return poll_follow(
            lambda sid, cursor: self.read(sid, cursor),
            session_id,
            after,
            changed=lambda: self._wait_change(session_id),
        )

    async def wake(self, session_id: str, *, delay: float = 0.0) -> None:
        validate.session_id(session_id)
        self._wake(session_id, validate.delay(delay))

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        taken = self._take(validate.lease(lease), 1, None)
        return taken[0] if taken else None

    async def take_wakes(self, *, lease: float, limit: int = 10) -> list[WakeLease]:
        """Up to ``limit`` due wakes, earliest due first, each leased as by
        ``take_wake`` (W11-W13 per wake); one step, so no other call sees half."""
        seconds = validate.lease(lease)
        return self._take(seconds, validate.wake_batch(limit), None)

    # -- AgentRouter (W19): who owns each session; each agent takes its own wakes ---

    async def claim(self, session_id: str, agent: str) -> str:
        validate.session_id(session_id)
        return self._owners.setdefault(session_id, validate.agent_name(agent))

    async def owner(self, session_id: str) -> str | None:
        validate.session_id(session_id)
        return self._owners.get(session_id)

    async def take_wakes_for(self, agent: str, *, lease: float, limit: int = 10) -> list[WakeLease]:
        """As :meth:`take_wakes`, of sessions owned by ``agent`` or by nobody."""
        name = validate.agent_name(agent)
        seconds = validate.lease(lease)
        return self._take(seconds, validate.wake_batch(limit), name)

    async def rename_agent(self, old: str, new: str) -> int:
        """Give every session of agent ``old`` to agent ``new``; how many moved."""
        moved = [sid for sid, owner in self._owners.items() if owner == old]
        for sid in moved:
            self._owners[sid] = new
        return len(moved)

    async def renew_wake(self, wake: WakeLease, *, lease: float) -> WakeLease:
        lease = validate.lease(lease)
        w = self._held(wake)
        w.lease_until = time.time() + lease
        owner = self._owners.get(wake.session_id)
        return WakeLease(wake.session_id, wake.token, wake.attempt, _dt(w.lease_until), owner)

    async def finish_wake(self, wake: WakeLease) -> None:
        w = self._held(wake)
        if w.gen == w.taken_gen:
            del self._wakes[wake.session_id]
        else:
            w.token, w.lease_until, w.attempt = None, None, 0

    async def delete(self, session_id: str) -> None:
        validate.session_id(session_id)
        log = self._logs.get(session_id)
        if log is not None:
            self._logs[session_id] = _Log(epoch=log.epoch + 1)
        self._wakes.pop(session_id, None)
        self._owners.pop(session_id, None)
        self._notify(session_id)

    async def drop_namespace(self) -> None:
        """Forget every session, epoch and wake (``fxworld.protocol.NamespaceDropper``):
        this world is its namespace's only store."""
        dropped = list(self._logs)
        self._logs.clear()
        self._wakes.clear()
        self._owners.clear()
        for session_id in dropped:
            self._notify(session_id)

    async def last_entry(self, session_id: str) -> Entry | None:
        """The log's last entry, or ``None`` (``fxworld.protocol.LastEntryReader``)."""
        validate.session_id(session_id)
        log = self._logs.get(session_id)
        return _copy(log.entries[-1]) if log is not None and log.entries else None

    async def delete_if_idle(self, session_id: str, *, last: int) -> bool:
        """``delete`` only if the log still ends at ``last`` and no wake is pending
        (``fxworld.protocol.IdleDeleter``): one step, so nothing lands between."""
        validate.session_id(session_id)
        validate.last_seq(last)
        log = self._logs.get(session_id)
        if log is None or len(log.entries) != last or session_id in self._wakes:
            return False
        await self.delete(session_id)  # completes without awaiting anything: still one step
        return True

    async def list_sessions(self, *, after: str = "", limit: int = 100) -> list[str]:
        validate.list_args(after, limit)
        return sorted(sid for sid, log in self._logs.items() if log.entries and sid > after)[:limit]

    # -- WakeLister: read-only, takes nothing (W11-W13 untouched) ------------------

    async def wake_state(self, session_id: str) -> WakeState | None:
        validate.session_id(session_id)
        w = self._wakes.get(session_id)
        return None if w is None else _state(session_id, w, time.time())

    async def list_wakes(self, *, after: str = "", limit: int = 100) -> list[WakeState]:
        validate.list_args(after, limit)
        now = time.time()
        chosen = sorted(sid for sid in self._wakes if sid > after)[:limit]
        return [_state(sid, self._wakes[sid], now) for sid in chosen]

    # -- internals ----------------------------------------------------------------

    def _land(self, sid: str, log: _Log, encoded: list[tuple[str, str]], epoch: int | None) -> int:
        at = datetime.now(UTC)
        for kind, text in encoded:
            log.entries.append(Entry(sid, len(log.entries) + 1, kind, json.loads(text), epoch, at))
        self._notify(sid)
        return len(log.entries)

    def _wake(self, sid: str, delay: float) -> None:
        due = time.time() + delay
        w = self._wakes.get(sid)
        if w is None:
            self._wakes[sid] = _Wake(due=due)
            return
        w.gen += 1
        w.due = due if w.due is None else min(w.due, due)

    def _take(self, lease: float, limit: int, agent: str | None) -> list[WakeLease]:
        """Lease the ``limit`` earliest ready wakes (W11: none before it is due; W12:
        a leased one is ready only when its lease ends); with ``agent``, only those of
        its sessions and of nobody's (W19)."""
        now = time.time()
        owners = self._owners
        ready = (
            (self._due_at(w), sid)
            for sid, w in self._wakes.items()
            if agent is None or owners.get(sid, agent) == agent
        )
        chosen = heapq.nsmallest(
            limit, ((at, sid) for at, sid in ready if at is not None and at <= now)
        )
        return [self._lease(sid, now + lease) for _, sid in chosen]

    def _lease(self, sid: str, until: float) -> WakeLease:
        w = self._wakes[sid]
        w.attempt += 1
        w.token = uuid.uuid4().hex
        w.lease_until = until
        w.taken_gen = w.gen  # W13: a wake() after this take keeps the session due
        w.due = None
        return WakeLease(sid, w.token, w.attempt, _dt(until), self._owners.get(sid))

    @staticmethod
    def _due_at(w: _Wake) -> float | None:
        """When ``w`` can be taken: its lease's end while leased, else its due time."""
        return w.lease_until if w.lease_until is not None else w.due

    def _held(self, wake: WakeLease) -> _Wake:
        validate.held(wake)
        w = self._wakes.get(wake.session_id)
        if (
            w is None
            or w.token != wake.token
            or w.lease_until is None
            or w.lease_until <= time.time()
        ):
            raise LeaseLost(
                f"session {wake.session_id!r}: the lease {wake.token[:8]} is no longer held"
            )
        return w

    def _notify(self, sid: str) -> None:
        here = asyncio.get_running_loop()
        for loop, event in self._changed.pop(sid, {}).items():
            if loop is here:
                event.set()
            else:
                with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                    loop.call_soon_threadsafe(event.set)

    async def _wait_change(self, sid: str) -> None:
        loop = asyncio.get_running_loop()
        event = self._changed.setdefault(sid, {}).setdefault(loop, asyncio.Event())
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancel that
        # arrives as the event fires, and the follow() task would then never stop.
        try:
            async with asyncio.timeout(1.0):
                await event.wait()
        except TimeoutError:
            pass


def _copy(entry: Entry) -> Entry:
    return Entry(
        entry.session_id, entry.seq, entry.kind, copy.deepcopy(entry.data), entry.epoch, entry.at
    )


def _state(sid: str, w: _Wake, now: float) -> WakeState:
    """The :class:`WakeState` of ``w``: due at its pending request, else (taken, no
    request since) when its lease ends and it is delivered again (W12)."""
    lease = w.lease_until if w.lease_until is not None and w.lease_until > now else None
    due = w.due if w.due is not None else w.lease_until if w.lease_until is not None else now
    return WakeState(sid, _dt(due), None if lease is None else _dt(lease), w.attempt)


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)
