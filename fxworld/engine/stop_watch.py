"""Seeing a stop while a slow step runs: follow the session's log.

A ``stop.requested`` for the current turn raises the run's stop signal
(:mod:`fxworld.engine.signals`). A worker sees it at its next append (the
append's seq shows an entry of another writer, and the writer reads it), and,
while a model call or a tool run has lasted :data:`WATCH_AFTER` seconds, by
following the session's log. So a session whose steps are quick is not followed
at all (on PostgreSQL a followed session costs a NOTIFY and a read per append),
and a slow step is cut within about ``WATCH_AFTER`` plus the backend's follow
latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from fxworld.errors import BackendUnavailable

from . import log
from .context import RunContext

__all__ = ["WATCH_AFTER", "watching"]

logger = logging.getLogger("fxworld.worker")

WATCH_AFTER = 0.1
"""Seconds a model call or tool run lasts before the worker follows the log for a
stop; a quicker step's stop is seen at the worker's next append."""

_RETRY_PAUSE = 0.1


@contextlib.asynccontextmanager
async def watching(run: RunContext) -> AsyncIterator[None]:
    """Around a model call or a tool run: once it has lasted ``WATCH_AFTER``
    seconds, follow the log for a stop (from what the run knew at its start)."""
    after = run.state.last_seq
    watcher: list[asyncio.Task[None]] = []  # a timer, not a task, for a quick step
    timer = asyncio.get_running_loop().call_later(
        WATCH_AFTER, lambda: watcher.append(asyncio.create_task(_watch(run, after)))
    )
    try:
        yield
    finally:
        timer.cancel()
        for task in watcher:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _watch(run: RunContext, after: int) -> None:
    """Follow the log; raise the stop signal when a stop for the current turn lands."""
    world, sid = run.writer.world, run.sid
    while True:
        follower = world.follow(sid, after)
        try:
            async for e in follower:
                after = e.seq
                if e.kind == log.STOP_REQUESTED and _for_current_turn(run, e.data.get("prompt")):
                    run.signals.see_stop()
        except BackendUnavailable as e:
            logger.warning("session %s: following for stop failed: %s", sid, e)
            await asyncio.sleep(_RETRY_PAUSE)
        finally:
            aclose = getattr(follower, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()


def _for_current_turn(run: RunContext, prompt: object) -> bool:
    cur = run.state.current
    return cur is None or prompt in (cur.prompt, None)
