"""The worker: takes wakes and runs sessions' turns, one fenced step at a time.

How the engine keeps a turn durable, part by part:

- **The worker** (this module) takes due wakes under a lease, up to
  ``concurrency`` sessions at once and as many wakes per look as it has room
  for, and runs each in a :class:`~fxworld.engine._run.run.SessionRun`.
- **A session run** (:mod:`fxworld.engine._run.run`) ``acquire``\\ s the session (a new
  fence; any older holder is refused from then on), rebuilds the state by reading
  the log (:mod:`fxworld.engine.replay`), and then repeats: decide the next step
  from the state, hand it to its handler, which appends what happened with the
  fence before the next step is decided.
- **The writer** (:mod:`fxworld.engine._run.fenced`) is the only way a run reaches the
  world: fenced appends, ``BackendUnavailable`` retried with backoff, a fenced
  append whose outcome is unknown checked by reading the log (only this fence
  writes entries of its epoch), so nothing is doubled; the lease renewed in the
  background; ``Fenced`` stops the run at once, with no further write and no
  further side effect.
- **The handlers**: the model step (:mod:`fxworld.engine._run.model_call`: text saved
  in chunks; the reply is ONE append with its calls' ``tool.started``, or with
  ``turn.finished``), the tool step (:mod:`fxworld.engine._run.tool_calls`: each
  ``tool.finished`` before the next model call, so a tool step costs two appends;
  after a crash, a started call runs again only if idempotent), the approval and
  stop steps (:mod:`fxworld.engine._run.approval_wait`: a call that needs approval
  parks the turn and holds no worker), and the turn's own entries and the yield
  (:mod:`fxworld.engine._run.turn_edges`).
- **Signals** (:mod:`fxworld.engine._run.signals`, :mod:`fxworld.engine._run.stop_watch`):
  SIGTERM (:meth:`Worker.stop`) abandons a running model call at once (its text is
  marked discarded, the next worker makes the call again), lets a running tool
  finish, then appends ``turn.yielded`` with a wake and releases the lease, so
  another worker continues at once. A ``stop.requested`` cuts the model stream
  (its saved text stays), starts no new tool, cancels an async tool, and
  ``turn.stopped`` ends the turn. A sync function a cut left running in its
  thread (:mod:`fxworld.engine.threads`) runs on; a stopping worker waits for it,
  so its late outcome (``tool.late``) is saved before the world is closed.
- **A deadline** (:mod:`fxworld.engine._run.deadline`): before a step that could
  outrun it, the turn yields with a wake, and the next invocation continues it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Iterator
from typing import Any

from fxworld.errors import BackendUnavailable, InvalidArgument
from fxworld.protocol import World
from fxworld.types import WakeLease
from fxworld.validate import MAX_WAKE_BATCH
from fxworld.wakes import take_wakes

from ..owners import served
from ..replay import RunEnd
from ..subagents import AgentParts
from ..threads import settle_left_running
from .deadline import Deadline
from .run import SessionRun
from .signals import Signals

__all__ = ["Worker"]

logger = logging.getLogger("fxworld.worker")

_FIRST_WAIT = 0.01
"""Seconds of the first pause after a look found nothing due (doubled up to the
poll interval while nothing is)."""


async def _settle() -> None:
    """A stopping worker waits for the threads that cut calls left running (a
    thread cannot be stopped, and the process waits for them anyway), so their
    late outcomes are saved while its world is open; a second signal leaves now."""
    waited = await settle_left_running()
    if waited:
        logger.info("the %d thread(s) left running have ended", waited)


class Worker:
    """One ``agent.work()`` loop. See :meth:`fxworld.engine.agent.Agent.work`."""

    def __init__(
        self,
        agent: AgentParts,
        *,
        concurrency: int,
        lease: float,
        deadline: float | None,
        until_idle: bool,
        poll_interval: float,
        agent_tools: bool = True,
    ) -> None:
        if concurrency < 1:
            raise InvalidArgument(f"concurrency must be at least 1, not {concurrency}")
        if not lease > 0:
            raise InvalidArgument(f"lease must be more than 0 seconds, not {lease}")
        self.agent = agent
        self.agents: dict[str, AgentParts] = served(agent) if agent_tools else {agent.name: agent}
        """The agents whose sessions it runs, by name: its agent's, and (``agent_tools``)
        those of the agents its agent reaches through agent tools."""
        self.concurrency = concurrency
        self.lease = lease
        self.deadline = Deadline(deadline)
        self.until_idle = until_idle
        self.poll_interval = poll_interval
        self.stopping = asyncio.Event()
        self._running: dict[asyncio.Task[None], Signals] = {}
        self.ended: dict[str, RunEnd] = {}
        """How each session's latest run here ended, for a worker that returns by
        itself (``until_idle`` or a deadline); a worker that runs until stopped
        keeps none (it would keep one per session it ever ran)."""
        self._keep_ends = until_idle or deadline is not None

    @property
    def hit_deadline(self) -> bool:
        """Whether a turn yielded to the deadline (or the budget ran out)."""
        return self.deadline.hit

    def stop(self) -> None:
        """Stop at the next step boundary and hand running sessions back."""
        self.stopping.set()
        for signals in list(self._running.values()):
            signals.hand_over()

    async def run(self, *, handle_signals: bool = False) -> None:
        self.deadline.start()
        world = await self.agent.ready()
        logger.info(
            "worker ready: taking wakes of agent(s) %s (concurrency %d, lease %.1fs%s)",
            ", ".join(self.agents),
            self.concurrency,
            self.lease,
            "" if self.deadline.budget is None else f", deadline in {self.deadline.budget:.1f}s",
        )
        with self._signal_handlers(handle_signals):
            try:
                await self._loop(world)
            finally:
                if self._running:
                    await asyncio.gather(*self._running, return_exceptions=True)
                if self.stopping.is_set():
                    await _settle()

    async def _loop(self, world: World) -> None:
        wait = _FIRST_WAIT
        while not self.stopping.is_set():
            no_new_work = self.deadline.too_close()
            if self.deadline.spent() or (no_new_work and not self._running):
                return
            room = self.concurrency - len(self._running)
            if room > 0 and not no_new_work:
                taken = await self._take(world, room)
                for wake in taken:
                    self._start(world, wake)
                if taken:
                    wait = _FIRST_WAIT
                    continue
                if self.until_idle and not self._running:
                    return
            await self._pause(wait)
            wait = min(wait * 2, self.poll_interval)

    async def _take(self, world: World, limit: int) -> list[WakeLease]:
        """The one place wakes are taken: up to ``limit`` due wakes of its agents'
        sessions (:func:`fxworld.take_wakes` with ``agent=``, one batch per agent
        while there is room: native where the world routes by agent, else its
        fallback), and of sessions no agent owns yet."""
        taken: list[WakeLease] = []
        try:
            for name in self.agents:
                room = min(limit - len(taken), MAX_WAKE_BATCH)
                if room < 1:
                    break
                taken += await take_wakes(world, lease=self.lease, limit=room, agent=name)
        except BackendUnavailable as e:
            logger.warning("take_wakes failed, retrying: %s", e)
        return taken

    def _start(self, world: World, wake: WakeLease) -> None:
        signals = Signals(handover=self.stopping.is_set())
        run = SessionRun(
            self.agent,
            world,
            wake,
            lease=self.lease,
            deadline=self.deadline,
            signals=signals,
            agents=self.agents,
        )
        task = asyncio.create_task(self._go(run), name=f"fxworld:{wake.session_id}")
        self._running[task] = signals
        task.add_done_callback(self._running.pop)

    async def _go(self, run: SessionRun) -> None:
        await run.go()  # it never raises
        if self._keep_ends and not run.handed_back:
            self.ended[run.sid] = run.ended

    @contextlib.contextmanager
    def _signal_handlers(self, install: bool) -> Iterator[None]:
        """SIGTERM/SIGINT stop the worker at the next step boundary (when ``install``)."""
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        if install:
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, self._on_signal)
                    installed.append(sig)
        try:
            yield
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    def _on_signal(self) -> None:
        if self.stopping.is_set():  # a second signal: leave now
            raise SystemExit(130)
        logger.info("signal received: handing sessions back at the next step boundary")
        self.stop()

    async def _pause(self, seconds: float) -> None:
        """Until ``seconds`` passed (or, with no room, a run ended), or a stop."""
        waiters: list[asyncio.Future[Any]] = [asyncio.ensure_future(self.stopping.wait())]
        if len(self._running) >= self.concurrency:
            waiters.extend(self._running)
        else:
            waiters.append(asyncio.ensure_future(asyncio.sleep(seconds)))
        _done, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for f in pending:
            if f not in self._running:
                f.cancel()
