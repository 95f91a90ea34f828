"""The tick: a message for each overdue wake, for a scheduled job (Vercel Cron, an
EventBridge schedule, Cloud Scheduler). It runs no turn itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fxworld.errors import ConfigurationError
from fxworld.protocol import AgentRouter, WakeLister, World

from .agents import send
from .base import Push

__all__ = ["tick", "OVERDUE", "PER_TICK"]

OVERDUE = 30.0
"""Seconds a wake must have been due, and not leased, before the tick rings for it:
longer than a delivery takes, so a message on its way is not doubled."""

PER_TICK = 1000
"""The most messages one tick sends."""


async def tick(world: World, push: Push, *, overdue: float = OVERDUE, limit: int = PER_TICK) -> int:
    """Push once for each wake of ``world`` due for more than ``overdue`` seconds
    and held by nobody, at most ``limit``; the number sent. A lost message thus
    costs at most one tick. Needs a world that lists its wakes
    (:class:`~fxworld.protocol.WakeLister`: every world fxworld ships)."""
    inner = getattr(world, "inner", world)  # a PushingWorld lists what it wraps
    if not isinstance(inner, WakeLister):
        raise ConfigurationError(f"{type(inner).__name__} cannot list its wakes; the tick needs it")
    before = datetime.now(UTC) - timedelta(seconds=overdue)
    sent = 0
    after = ""
    while sent < limit:
        page = await inner.list_wakes(after=after, limit=min(100, limit - sent))
        if not page:
            break
        for w in page:
            if w.leased_until is None and w.due_at <= before and sent < limit:
                # W19: the message names the session's agent (its queue, with one per agent)
                owner = await inner.owner(w.session_id) if isinstance(inner, AgentRouter) else None
                await send(push, w.session_id, delay=0.0, agent=owner)
                sent += 1
        after = page[-1].session_id
    return sent
