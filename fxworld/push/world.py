"""PushingWorld: any world, with a push after every wake it makes durable.

A wake becomes durable in exactly two calls of the World protocol: ``append(...,
wake=d)`` (W7) and ``wake(delay=d)`` (W11). Every path that asks for a turn goes
through one of them: a prompt (``session.prompt``, ``create``, HTTP ``POST``), a
turn that yields at its deadline, an approval decided (API, HTTP, CLI, inspector)
or timed out, a Stop, ``wake(delay=)``. So this wrapper, and only it, pushes: after
the inner call returned (the world stays the truth; the message is a doorbell).

A push never holds the call that made the wake: the call returns once the wake is
durable (a prompt is acknowledged then), and the push goes on beside it, in a task
(:meth:`PushingWorld.drain` waits for those in flight; ``close()`` and the end of
``agent.work()`` do). A push that needs no wait (an in-process queue) is sent before
the call returns all the same: the task's first step runs first. A push's time is
bounded (``timeout``, default :data:`DEFAULT_TIMEOUT` seconds, or
``$FXWORLD_PUSH_TIMEOUT``): a queue that hangs is given up then. A push that fails
or times out never fails the call: the wake is saved, the failure is logged and
counted (``PushStats.failed``, the OpenTelemetry counter ``fxworld.push.failed``),
and the tick (:func:`fxworld.push.tick`) sends the message again once the wake is
overdue. A process that ends before a push in flight was sent (``asyncio.run``
returning right after the prompt) leaves it to the tick in the same way.

A wake of a session whose earlier wake request is still pending, due no later,
sends no second message when this process pushed for that request (within
:data:`COALESCE_WINDOW`): the first message serves both (``PushStats.coalesced``).
It looks once before the call (``wake_state``) and once beside it, so a request
taken or finished meanwhile is pushed for as before. Prompts queued in one
session so cost a message for the first, not one each.

A wake appended by a run that holds the session's lease (taken through this
world: a yield, an approval's timeout) is pushed when that lease is finished, not
before: a message delivered while the lease is held would find nothing to take
and wait for a redelivery. If the process dies first, the queue redelivers the
message that started the run (or the tick sends one).

Each message names the agent that owns the session (W19), so that a queue shared
by several agents' runners, or one queue per agent (:class:`~fxworld.push.PerAgentPush`),
gets it to that agent's runners: the owner this world saw (a ``claim``, a taken
wake's ``WakeLease.agent``, a prompt entry's ``agent``), else the inner world's
``owner()``, asked in the push's own task.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta

from fxworld.errors import ConfigurationError
from fxworld.protocol import (
    AgentRouter,
    IdleDeleter,
    LastEntryReader,
    NamespaceDropper,
    SessionLister,
    WakeBatcher,
    WakeLister,
    World,
)
from fxworld.types import Entry, Fence, NewEntry, WakeLease, WakeState
from fxworld.urls import mask_urls

from .agents import send
from .base import Push, PushStats, count

__all__ = ["PushingWorld", "DEFAULT_TIMEOUT", "TIMEOUT_ENV_VAR"]

logger = logging.getLogger("fxworld.push")

COALESCE_WINDOW = 60.0
"""Seconds after a push for a session during which a new wake of it first looks
whether the session's pending wake already has its message (one ``wake_state``
call); later, or for a session this process never pushed for, it pushes at once."""

DEFAULT_TIMEOUT = 10.0
"""Seconds one push may take before it is given up (and counted as failed)."""
TIMEOUT_ENV_VAR = "FXWORLD_PUSH_TIMEOUT"
_OWNERS_KEPT = 10_000  # sessions whose agent a pushing world remembers
"""The environment variable that sets the push timeout when none is given."""


def _timeout(given: float | None) -> float:
    """The push timeout: ``given``, else ``$FXWORLD_PUSH_TIMEOUT``, else the default."""
    value: object = given
    if value is None:
        raw = os.environ.get(TIMEOUT_ENV_VAR)
        if not raw:
            return DEFAULT_TIMEOUT
        try:
            value = float(raw)
        except ValueError:
            value = raw
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and value > 0)
    ):
        raise ConfigurationError(f"the push timeout must be seconds > 0, not {value!r}")
    return float(value)


class PushingWorld:
    """Wraps ``inner`` so that each wake it makes durable is followed by
    ``push.push(session_id, delay=...)``; see the module. Every guarantee W1-W18
    is the inner world's: each call is forwarded unchanged. The optional
    protocols are there exactly when ``inner`` has them. ``timeout``: the seconds
    one push may take (``None``: ``$FXWORLD_PUSH_TIMEOUT``, else 10)."""

    take_wakes: Callable[..., Awaitable[list[WakeLease]]]
    list_wakes: Callable[..., Awaitable[list[WakeState]]]
    wake_state: Callable[[str], Awaitable[WakeState | None]]
    list_sessions: Callable[..., Awaitable[list[str]]]
    last_entry: Callable[[str], Awaitable[Entry | None]]
    delete_if_idle: Callable[..., Awaitable[bool]]
    drop_namespace: Callable[[], Awaitable[None]]
    claim: Callable[[str, str], Awaitable[str]]
    owner: Callable[[str], Awaitable[str | None]]
    take_wakes_for: Callable[..., Awaitable[list[WakeLease]]]

    def __init__(self, inner: World, push: Push, *, timeout: float | None = None) -> None:
        self.inner = inner
        self.push = push
        self.timeout = _timeout(timeout)
        self.stats = PushStats()
        self._sending: set[asyncio.Task[None]] = set()  # pushes beside their calls
        self.capabilities: frozenset[str] = frozenset(inner.capabilities)
        self._held: dict[str, float] = {}  # session id: when its lease taken here ends (monotonic)
        self._deferred: dict[str, float] = {}  # session id: the earliest deferred delay
        self._rung: dict[str, float] = {}  # session id: when a push for it was sent (monotonic)
        if isinstance(inner, WakeBatcher):
            self.take_wakes = self._take_wakes
        if isinstance(inner, WakeLister):
            self.list_wakes = inner.list_wakes
            self.wake_state = inner.wake_state
        if isinstance(inner, SessionLister):
            self.list_sessions = inner.list_sessions
        if isinstance(inner, LastEntryReader):
            self.last_entry = inner.last_entry
        if isinstance(inner, IdleDeleter):
            self.delete_if_idle = inner.delete_if_idle
        if isinstance(inner, NamespaceDropper):
            self.drop_namespace = inner.drop_namespace
        self._owners: dict[str, str] = {}  # session id: its agent, as this world saw it
        if isinstance(inner, AgentRouter):
            self.claim = self._claim
            self.owner = inner.owner
            self.take_wakes_for = self._take_wakes_for
        for name in ("namespace", "max_entry_bytes"):
            if hasattr(inner, name):
                setattr(self, name, getattr(inner, name))

    def __repr__(self) -> str:
        return f"PushingWorld({self.inner!r}, {self.push!r})"

    async def setup(self) -> None:
        await self.inner.setup()

    async def close(self) -> None:
        try:
            await self.drain()
            await self.inner.close()
        finally:
            await self.push.close()

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
        pending = None if wake is None else await self._pending(session_id, wake)
        seq = await self.inner.append(
            session_id, entries, fence=fence, expect=expect, key=key, wake=wake
        )
        for e in entries:  # a prompt names its agent (docs/log-format.md)
            agent = e.data.get("agent") if e.kind == "prompt" else None
            if isinstance(agent, str):
                self._saw(session_id, agent)
        if wake is not None:  # durable now (W7): ring
            await self.ring(session_id, wake, pending=pending)
        return seq

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        return await self.inner.read(session_id, after, limit=limit)

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Entry]:
        return self.inner.follow(session_id, after)

    async def wake(self, session_id: str, *, delay: float = 0.0) -> None:
        pending = await self._pending(session_id, delay)
        await self.inner.wake(session_id, delay=delay)
        await self.ring(session_id, delay, pending=pending)

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        got = await self.inner.take_wake(lease=lease)
        if got is not None:
            self._hold(got.session_id, lease, got.agent)
        return got

    async def _take_wakes(self, *, lease: float, limit: int = 10) -> list[WakeLease]:
        assert isinstance(self.inner, WakeBatcher)
        got = await self.inner.take_wakes(lease=lease, limit=limit)
        for w in got:
            self._hold(w.session_id, lease, w.agent)
        return got

    async def _take_wakes_for(
        self, agent: str, *, lease: float, limit: int = 10
    ) -> list[WakeLease]:
        assert isinstance(self.inner, AgentRouter)
        got = await self.inner.take_wakes_for(agent, lease=lease, limit=limit)
        for w in got:
            self._hold(w.session_id, lease, w.agent)
        return got

    async def _claim(self, session_id: str, agent: str) -> str:
        assert isinstance(self.inner, AgentRouter)
        owner = await self.inner.claim(session_id, agent)
        self._saw(session_id, owner)
        return owner

    def _saw(self, session_id: str, agent: str | None) -> None:
        if agent is not None:
            if len(self._owners) >= _OWNERS_KEPT:
                self._owners.clear()  # asked again of the world when needed
            self._owners[session_id] = agent

    async def _agent(self, session_id: str) -> str | None:
        """The session's agent for its message (W19): as seen here, else the world's."""
        known = self._owners.get(session_id)
        if known is None and isinstance(self.inner, AgentRouter):
            known = await self.inner.owner(session_id)
            self._saw(session_id, known)
        return known

    async def renew_wake(self, wake: WakeLease, *, lease: float) -> WakeLease:
        renewed = await self.inner.renew_wake(wake, lease=lease)
        self._hold(wake.session_id, lease)
        return renewed

    async def finish_wake(self, wake: WakeLease) -> None:
        try:
            await self.inner.finish_wake(wake)
        finally:
            self._held.pop(wake.session_id, None)
            delay = self._deferred.pop(wake.session_id, None)
            if delay is not None:
                await self._send(wake.session_id, delay)

    async def delete(self, session_id: str) -> None:
        await self.inner.delete(session_id)

    async def _still_pending(self, session_id: str, due_at: datetime) -> bool:
        assert isinstance(self.inner, WakeLister)
        try:
            state = await self.inner.wake_state(session_id)
        except Exception:  # only a saving: push as always
            return False
        return state is not None and state.due_at == due_at

    def _hold(self, session_id: str, lease: float, agent: str | None = None) -> None:
        self._held[session_id] = time.monotonic() + lease
        self._saw(session_id, agent)

    async def _pending(self, session_id: str, delay: float) -> datetime | None:
        """Before a wake of ``session_id`` due in ``delay`` s is made durable: when
        this process pushed for the session within :data:`COALESCE_WINDOW`, and
        the session already has a wake request pending that is due no later (one
        message rings for it: the one pushed when it was made), when it is due;
        else ``None``. Costs one ``wake_state`` call, only then."""
        rung = self._rung.get(session_id)
        if rung is None or time.monotonic() - rung > COALESCE_WINDOW:
            self._rung.pop(session_id, None)
            return None
        if not isinstance(self.inner, WakeLister):
            return None
        try:
            state = await self.inner.wake_state(session_id)
        except Exception:  # only a saving: push as always
            return None
        if state is None or state.due_at == state.leased_until:  # nothing requested
            return None
        if state.due_at > datetime.now(UTC) + timedelta(seconds=delay):
            return None  # due later than this one (an approval's timeout): push
        return state.due_at

    async def ring(self, session_id: str, delay: float, *, pending: datetime | None = None) -> None:
        """Push now, or once this process's lease of the session is finished. A
        lease that ran out here unfinished (its run was replaced, or failed) holds
        nothing back: that wake is due again, and the push goes out now.

        ``pending``: when the wake request found pending before this one was made
        was due (:meth:`_pending`). If the session's wake is still due then, that
        request was neither taken nor finished meanwhile (a merged request keeps
        the earliest due time, W11), so its message serves this wake too: no push
        (``PushStats.coalesced``). Prompts queued in one session thus cost one
        message, not one each, every one delivered again while a run holds the
        session."""
        until = self._held.get(session_id)
        if until is not None and until <= time.monotonic():
            del self._held[session_id]
            self._deferred.pop(session_id, None)
            until = None
        if until is not None:
            earlier = self._deferred.get(session_id)
            self._deferred[session_id] = delay if earlier is None else min(earlier, delay)
            return
        sending = asyncio.create_task(self._send(session_id, delay, pending))
        self._sending.add(sending)
        sending.add_done_callback(self._sending.discard)
        await asyncio.sleep(0)  # its first step: a push that needs no wait is sent now

    async def drain(self) -> None:
        """Wait for the pushes this world sends beside their calls, on this event
        loop (each ends within ``timeout``: sent, failed or given up)."""
        loop = asyncio.get_running_loop()
        while pending := [t for t in self._sending if t.get_loop() is loop and not t.done()]:
            await asyncio.wait(pending)

    async def _send(self, session_id: str, delay: float, pending: datetime | None = None) -> None:
        """One push, within ``timeout``; a failure is logged and counted, never
        raised: the wake is saved. With ``pending`` (see :meth:`ring`), none when
        the request found pending still is."""
        try:
            async with asyncio.timeout(self.timeout):
                if pending is not None and await self._still_pending(session_id, pending):
                    self.stats.coalesced += 1
                    return
                self._rung[session_id] = time.monotonic()  # from now on, in flight
                agent = await self._agent(session_id)
                await send(self.push, session_id, delay=delay, agent=agent)
        except Exception as e:
            self._rung.pop(session_id, None)  # the tick's: the next wake pushes again
            self.stats.failed += 1
            count("failed")
            why = (
                f"no answer within {self.timeout:g} s"
                if isinstance(e, TimeoutError)
                else f"{type(e).__name__}: {mask_urls(str(e))}"
            )
            logger.warning(
                "push for session %s failed (%s); the wake is saved, the tick sends it again",
                session_id,
                why,
            )
            return
        self.stats.sent += 1
        count("sent")
