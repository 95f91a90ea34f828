"""Seeing a stop while a slow step runs: follow the session's log.

A ``stop.requested`` for the current turn raises the run's stop signal
(:mod:`fxworld.engine._run.signals`). A worker sees it at its next append (the
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

from fxworld.errors import BackendUnavailable

from .. import log
from .state import RunState

__all__ = ["WATCH_AFTER", "StopWatch"]

logger = logging.getLogger("fxworld.worker")

WATCH_AFTER = 0.1
"""Seconds a model call or tool run lasts before the worker follows the log for a
stop; a quicker step's stop is seen at the worker's next append."""

_RETRY_PAUSE = 0.1


class StopWatch:
    """Around a model call or a tool run: once it has lasted ``WATCH_AFTER``
    seconds, follow the log for a stop (from what the run knew at its start). A
    quick step costs one timer, not a task."""

    def __init__(self, run: RunState) -> None:
        self._run = run
        self._after = run.state.last_seq
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(WATCH_AFTER, self._start)

    def _start(self) -> None:
        self._task = asyncio.create_task(_watch(self._run, self._after))

    async def __aexit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def _watch(run: RunState, after: int) -> None:
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


def _for_current_turn(run: RunState, prompt: object) -> bool:
    cur = run.state.current
    return cur is None or prompt in (cur.prompt, None)
