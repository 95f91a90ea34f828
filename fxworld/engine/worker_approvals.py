"""The worker's approval and stop steps: a mixin of the worker's session run.

- ``RequestApproval``: one ``approval.requested`` per call, appended with a delayed
  wake at the first timeout (W7), so the timeout happens even if no process is up.
- ``WaitForApproval``: only undecided calls are left; the run finishes its wake and
  holds nothing. A decision (an unfenced append with a wake) brings a worker back.
- ``TimeOutApproval``: the worker writes the timeout's denial
  (:func:`~fxworld.engine.approvals.expired_decision`), keyed like a person's
  decision, so whichever lands first stands (W6); a decision that comes after
  the expiry writes that same denial instead of its own.
- A call the log shows waiting for a decision waits by the log, not by the
  tools of this deploy: dropping ``needs_approval`` never runs it undecided.
- Stop: a ``stop.requested`` for the current turn sets ``stop_seen``. A worker
  sees it at its next append (the append's seq shows an entry of another writer,
  and the worker reads it), and, while a model call or a tool call has been running
  for ``WATCH_AFTER`` seconds, by following the session's log. So a session whose
  steps are quick is not followed at all (on PostgreSQL a followed session costs
  a NOTIFY and a read per append), and a slow step is cut within about
  ``WATCH_AFTER`` plus the backend's follow latency. The model stream is then cut
  (its saved text stays), no new tool starts, async tools are cancelled (sync ones
  finish and their result is saved), and ``StopTurn`` appends ``turn.stopped``.
- A wake that finds nothing to do is finished without taking the session (no
  ``fence``): the wake a stop or a decision leaves behind once the run it reached
  has finished (W13).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from fxworld.errors import BackendUnavailable
from fxworld.protocol import World
from fxworld.types import Fence, NewEntry

from . import log
from ._faults import crash_point
from .approvals import decision_key, expired_decision, requested_entry
from .replay import (
    CallState,
    Idle,
    Replay,
    RequestApproval,
    StopTurn,
    TimeOutApproval,
    WaitForApproval,
    next_step,
)

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["ApprovalAndStop"]

logger = logging.getLogger("fxworld.worker")
T = TypeVar("T")
_RETRY_PAUSE = 0.1
WATCH_AFTER = 0.1
"""Seconds a model call or tool run lasts before the worker follows the log for a
stop; a quicker step's stop is seen at the worker's next append."""


class ApprovalAndStop:
    """The approval and stop steps of ``worker._SessionRun`` (which provides the
    state, the world and the careful ``_append`` / ``_retry`` / ``_catch_up``)."""

    agent: Agent
    world: World
    sid: str
    fence: Fence | None
    state: Replay
    stop_seen: asyncio.Event  # a stop.requested for the current turn landed
    _stop_cancelled: set[str]  # execution ids of the async calls a stop cancelled

    if TYPE_CHECKING:

        async def _append(
            self, entries: Sequence[NewEntry], *, wake: float | None = None
        ) -> int: ...
        async def _retry(self, op: Callable[[], Awaitable[T]]) -> T: ...
        async def _catch_up(self) -> None: ...
        async def _finish_wake(self) -> None: ...

    async def _do_approval_or_stop(
        self, step: RequestApproval | TimeOutApproval | StopTurn
    ) -> None:
        cur = self.state.current
        assert cur is not None
        if isinstance(step, RequestApproval):
            entries, wake = self._approval_entries(step.calls)
            await self._append(entries, wake=wake)
            crash_point("after-approval-requested")
        elif isinstance(step, TimeOutApproval):
            decided = expired_decision(step.call.execution_id, step.reason)
            # keyed like a person's decision: if one landed first, it stands (W6)
            key = decision_key(step.call.execution_id)
            fence = self.fence
            assert fence is not None
            await self._retry(lambda: self.world.append(self.sid, [decided], fence=fence, key=key))
            await self._catch_up()
        else:
            await self._append(
                [
                    log.entry(
                        log.TURN_STOPPED,
                        prompt=cur.prompt,
                        turn=cur.turn,
                        text=step.text,
                        reason=step.reason,
                    )
                ]
            )
            logger.info("session %s: turn stopped", self.sid)

    def _approval_entries(self, calls: Sequence[CallState]) -> tuple[list[NewEntry], float | None]:
        """One ``approval.requested`` per call, and the delay of the wake that must land
        with them (W7): the first timeout, so it happens even if no process is up."""
        now = datetime.now(UTC)
        entries = []
        for c in calls:
            timeout = self.agent.tools[c.name].approval_timeout
            expires = None if timeout is None else (now + timedelta(seconds=timeout))
            entries.append(requested_entry(c.execution_id, c.id, c.name, c.input, timeout, expires))
        timeouts = [t for c in calls if (t := self.agent.tools[c.name].approval_timeout)]
        return entries, (min(timeouts) if timeouts else None)

    async def _nothing_to_do(self) -> bool:
        """A wake that finds nothing to do (e.g. the one a stop or a decision left
        behind, due again once the run it reached finished: W13), or only calls
        still waiting for a decision, is finished without taking the session, so
        it writes no ``fence``. A request that lands meanwhile keeps the session
        due (W13): nothing is lost."""
        await self._catch_up()
        tools = self.agent.tools
        timeouts = {name: t.approval_timeout for name, t in tools.items() if t.needs_approval}
        step = next_step(self.state, {n: t.idempotent for n, t in tools.items()}, timeouts)
        if isinstance(step, WaitForApproval):
            await self._wait_for_approval(step)
        elif isinstance(step, Idle):
            logger.info("session %s: nothing to do; wake finished", self.sid)
        else:
            return False
        await self._finish_wake()
        return True

    async def _wait_for_approval(self, step: WaitForApproval) -> None:
        """Only undecided calls are left: hold nothing. A decision's wake brings a
        worker back; the first expiry has its own delayed wake."""
        if step.due is not None:
            delay = max(0.0, (step.due - datetime.now(UTC)).total_seconds())
            await self._retry(lambda: self.world.wake(self.sid, delay=delay))
        logger.info("session %s: waiting for approval; holding nothing", self.sid)

    @contextlib.asynccontextmanager
    async def _watching_for_stop(self) -> AsyncIterator[None]:
        """Around a model call or a tool run: once it has lasted ``WATCH_AFTER``
        seconds, follow the log for a stop (from what the worker knew at its start)."""
        after = self.state.last_seq
        watcher: list[asyncio.Task[None]] = []  # a timer, not a task, for a quick step
        timer = asyncio.get_running_loop().call_later(
            WATCH_AFTER, lambda: watcher.append(asyncio.create_task(self._watch_for_stop(after)))
        )
        try:
            yield
        finally:
            timer.cancel()
            for task in watcher:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _note_stop(self) -> None:
        """After the worker read entries of other writers: a stop among them is seen."""
        cur = self.state.current
        if cur is not None and cur.stop:
            self.stop_seen.set()

    async def _watch_for_stop(self, after: int) -> None:
        """Follow the log; set :attr:`stop_seen` when a stop for the current turn lands."""
        while True:
            follower = self.world.follow(self.sid, after)
            try:
                async for e in follower:
                    after = e.seq
                    cur = self.state.current
                    if e.kind == log.STOP_REQUESTED and (
                        cur is None or e.data.get("prompt") in (cur.prompt, None)
                    ):
                        self.stop_seen.set()
            except BackendUnavailable as e:
                logger.warning("session %s: following for stop failed: %s", self.sid, e)
                await asyncio.sleep(_RETRY_PAUSE)
            finally:
                aclose = getattr(follower, "aclose", None)
                if aclose is not None:
                    with contextlib.suppress(Exception):
                        await aclose()

    async def _cancel_async_calls_on_stop(
        self, calls: dict[str, tuple[str, asyncio.Future[Any]]]
    ) -> None:
        """On a stop, cancel the running calls of async tools (a sync tool runs in a
        thread: it is let finish and its result saved)."""
        await self.stop_seen.wait()
        for xid, (name, task) in list(calls.items()):
            if not task.done() and inspect.iscoroutinefunction(self.agent.tools[name].fn):
                self._stop_cancelled.add(xid)
                task.cancel()
