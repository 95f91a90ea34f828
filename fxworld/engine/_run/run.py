"""One delivery of one session's wake: take the session, replay, steps, hand back.

:class:`SessionRun` ``acquire``\\ s the session through its writer (a new fence;
any older holder is refused from then on), rebuilds the state by reading the log,
and then repeats: decide the next step from the state
(:func:`~fxworld.engine.replay.next_step`), hand it to its handler, which appends
what happened with the fence before the next step is decided. The handlers:

- the model step (:mod:`fxworld.engine._run.model_call`) and the tool step
  (:mod:`fxworld.engine._run.tool_calls`), watched for a stop while slow
  (:mod:`fxworld.engine._run.stop_watch`) and timed for the deadline
  (:mod:`fxworld.engine._run.deadline`);
- the approval and stop steps (:mod:`fxworld.engine._run.approval_wait`);
- the turn's own entries and the yield (:mod:`fxworld.engine._run.turn_edges`).

A child session (an agent tool's: :mod:`fxworld.engine.subagents`) runs with the
child's agent, found from the worker's through the path its first prompt names;
once its first turn has ended, the run reports the answer to the parent's log
before it finishes the wake (a run that dies in between leaves the report to the
next delivery).

How the run ended (:attr:`SessionRun.ended`, a
:data:`~fxworld.engine.replay.RunEnd`) is decided from the state it holds, with no
further read: ``"done"`` or ``"waiting"`` from the step it stopped at, ``"yielded"``
when its yield's wake was pushed, else ``"pending"`` (a yield nothing pushed, a
run stopped, replaced or failed); :meth:`fxworld.Agent.work` returns it.

``Fenced`` means another worker replaced this one: the run stops at once, with no
further write and no further side effect. An entry the world refuses
(``InvalidEntry``, ``EntryTooLarge``) where no step turned it into an outcome of
its own (:mod:`fxworld.engine.unsaved`) fails the running turn at once: a turn is
never left to stall and be delivered again. A wake that finds nothing to do (e.g.
the one a stop or a decision left behind, due again once the run it reached
finished: W13), or only calls still waiting for a decision, is finished without
taking the session, so it writes no ``fence``; a request that lands meanwhile
keeps the session due (W13): nothing is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from functools import partial

from fxworld.errors import Fenced, InvalidEntry
from fxworld.protocol import World
from fxworld.types import WakeLease

from .. import clock, log
from ..log_fields import LogFields, set_fields
from ..owners import hand_back, run_owner, served
from ..replay import (
    CallModel,
    DiscardText,
    FinishTurn,
    Idle,
    InterruptTool,
    RequestApproval,
    RunEnd,
    RunTools,
    StartTurn,
    Step,
    StopTurn,
    TimeOutApproval,
    WaitForApproval,
    WaitForChild,
    end_of,
)
from ..subagents import AgentParts, agent_for, no_agent
from ..unsaved import turn_refused
from .approval_wait import (
    request_approval,
    stop_turn,
    time_out_approval,
    wait_for_approval,
    wait_for_child,
)
from .children import report_to_parent
from .deadline import Deadline
from .fenced import FencedWriter, StopRun
from .model_call import call_model
from .otel import for_run
from .signals import Signals
from .state import RunState
from .stop_watch import StopWatch
from .tool_calls import run_tools
from .turn_edges import (
    discard_text,
    fail_refused,
    finish_turn,
    give_up_if_redelivered,
    interrupt_tool,
    start_turn,
    yield_turn,
)

__all__ = ["SessionRun"]

logger = logging.getLogger("fxworld.worker")
logger.addFilter(LogFields())  # each record: the session id and turn of its run


class SessionRun:
    """One delivery of wake ``wake`` of ``world``, for ``agent``; see the module.
    ``signals`` reach it from the worker (handover) and from the log (stop)."""

    def __init__(
        self,
        agent: AgentParts,
        world: World,
        wake: WakeLease,
        *,
        lease: float,
        deadline: Deadline,
        signals: Signals,
        agents: Mapping[str, AgentParts] | None = None,
    ) -> None:
        self.writer = FencedWriter(world, wake, lease=lease)
        self.root = agent
        self.agents: Mapping[str, AgentParts] = agents if agents is not None else served(agent)
        """The agents this worker runs, by name (:func:`~fxworld.engine.owners.served`)."""
        self.owner = ""
        self.handed_back = False
        """Whether the session was another agent's: its wake was handed back, unrun."""
        self.run = RunState(self.writer, agent, signals)
        self.deadline = deadline
        self.sid = wake.session_id
        self.writer.on_news = self._note_stop
        self.telemetry = self.run.telemetry = for_run(getattr(agent, "name", "agent"), wake)
        self.ended: RunEnd = "pending"
        """How the run ended (see the module); ``"pending"`` until it has."""

    def _note_stop(self) -> None:
        """After an append read entries of other writers: a stop among them is seen."""
        cur = self.writer.state.current
        if cur is not None and cur.stop:
            self.run.signals.see_stop()

    async def go(self) -> None:
        """The run, with its lease renewed meanwhile; it never raises."""
        set_fields(self.sid, "")  # this task's log lines carry the session (and turn)
        renewer = asyncio.create_task(self.writer.renew())
        outcome = "run ended"
        try:
            self.ended = await self._go()
        except StopRun as e:
            logger.info("session %s: stopped: %s", self.sid, e)
            outcome = f"stopped: {e}"
        except Fenced:
            logger.info("session %s: replaced by another worker; stopping", self.sid)
            outcome = "replaced by another worker"
        except InvalidEntry as e:
            outcome = await self._refused(e)
        except Exception:
            logger.exception("session %s: run failed; its lease will expire and retry", self.sid)
            outcome = "run failed"
        finally:
            self.telemetry.end(outcome)
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer

    async def _refused(self, e: InvalidEntry) -> str:
        """The world refused an entry of the running turn: the turn fails, naming
        it, and the wake is finished (another one comes for prompts that wait)."""
        logger.exception("session %s: an entry was refused", self.sid)
        cur = self.run.state.current
        if cur is None:  # nothing to fail: its lease will expire and retry
            return "run failed"
        error = turn_refused(e)
        try:
            failed = log.entry(log.TURN_FAILED, prompt=cur.prompt, turn=cur.turn, error=error)
            await self.writer.append([failed], wake=0.0)
            await self.writer.finish_wake()
        except Exception:
            logger.exception("session %s: its turn could not be failed", self.sid)
            return "run failed"
        return f"turn failed: {error}"

    async def _go(self) -> RunEnd:
        nothing = await self._nothing_to_do()
        if nothing is not None:
            return nothing
        last = self.writer.last_read
        fence = await self.writer.acquire()
        await self.writer.catch_up()
        self._log_turn()  # a turn taken over: its lines carry the turn from here on
        logger.info(
            "session %s: taken (delivery %d, epoch %d)",
            self.sid,
            self.writer.wake.attempt,
            fence.epoch,
        )
        self.telemetry.taken(fence, self.run.state, last)
        await give_up_if_redelivered(self.run)
        await fail_refused(self.run)
        ended = await self._steps()
        if ended in ("done", "waiting"):  # a yield finished its wake itself
            await report_to_parent(self.run)
            await self.writer.finish_wake()
        return ended

    async def _nothing_to_do(self) -> RunEnd | None:
        """Finish a wake with nothing to do without taking the session (see the
        module): how the run ended then, else ``None``."""
        await self.writer.catch_up()
        if not await self._ours():
            await hand_back(self.writer.world, self.writer.wake)
            self.handed_back = True
            logger.info(
                "session %s: agent %r's, not this worker's: handed back", self.sid, self.owner
            )
            return "pending"
        self._bind_agent()
        step = self.run.next_step()
        if self.run.refusal and not isinstance(step, Idle):
            return None  # its turn fails (fail_refused)
        if isinstance(step, WaitForApproval):
            await wait_for_approval(self.run, step)
        elif isinstance(step, WaitForChild):
            await wait_for_child(self.run, step)
        elif isinstance(step, Idle):
            await report_to_parent(self.run)
            logger.info("session %s: nothing to do; wake finished", self.sid)
        else:
            return None
        await self.writer.finish_wake()
        return end_of(step)

    async def _ours(self) -> bool:
        """Whether this worker may run the session: its owner (claimed now for the
        agent that would run it, when it has none) is one of this worker's agents.
        Checked before anything is written: defence in depth behind the take, on
        every world (docs/engine.md, "Many agents, one world")."""
        state = self.writer.state
        via = agent_for(self.root, state.agent_path) if state.agent_path else None
        natural = (via or self.root).name
        self.owner = await self.writer.retry(
            partial(run_owner, self.writer.world, self.writer.wake, natural)
        )
        return self.owner in self.agents

    def _bind_agent(self) -> None:
        """A session runs with its owner's agent. A child session (or a fork of one)
        runs with the child's agent, found from the worker's through the path its
        first entry names, or, on a worker of the child's own agent, that agent
        (none found: its turns fail)."""
        path = self.writer.state.agent_path
        if not path:
            self._use(self.agents.get(self.owner, self.root), path, "")
            return
        agent = agent_for(self.root, path)
        if agent is None and self.writer.state.first_agent == self.owner:
            agent = self.agents.get(self.owner)
        self._use(agent, path, "" if agent is not None else no_agent(path))

    def _use(self, agent: AgentParts | None, path: tuple[str, ...], refusal: str) -> None:
        if agent is self.root and not path:
            return
        self.run = RunState(
            self.writer, agent or self.root, self.run.signals, path=path, refusal=refusal
        )
        name = getattr(self.run.agent, "name", "agent")
        self.telemetry = self.run.telemetry = for_run(name, self.writer.wake)

    async def _steps(self) -> RunEnd:
        """The steps, until none is left (``"done"``), the turn waits
        (``"waiting"``) or it yielded (``"yielded"`` when its wake was pushed, else
        ``"pending"``)."""
        run = self.run
        while True:
            if self.writer.lease_lost:
                raise StopRun("lease lost")
            if run.signals.stop:  # read the stop: the next step ends the turn
                run.signals.clear_stop()
                await self.writer.catch_up()
            step = run.next_step()
            if isinstance(step, Idle):
                return "done"
            if isinstance(step, WaitForApproval):
                await wait_for_approval(run, step)
                return "waiting"
            if isinstance(step, WaitForChild):
                await wait_for_child(run, step)
                return "waiting"
            reason = self._must_yield(step)
            if reason is not None:
                self.deadline.hit = self.deadline.hit or reason == "deadline"
                return "yielded" if await yield_turn(run, reason) else "pending"
            await self._do(step)
            # Take turns with the rest of the loop at each boundary, also on a world
            # that answers without waiting (MemoryWorld): a stop can land meanwhile.
            await asyncio.sleep(0)

    def _must_yield(self, step: Step) -> str | None:
        if self.run.signals.handover:
            return "handover"
        return None if self.deadline.fits(step) else "deadline"

    async def _do(self, step: Step) -> None:
        """Hand ``step`` to its handler, with its telemetry."""
        self._log_turn()
        self.telemetry.step(step, self.run.state)
        await self._handle(step)
        self.telemetry.stepped(step, self.run.state)
        self._log_turn()

    def _log_turn(self) -> None:
        cur = self.run.state.current
        set_fields(self.sid, "" if cur is None else cur.turn)

    async def _handle(self, step: Step) -> None:
        run = self.run
        match step:
            case CallModel() | RunTools():
                started = clock.monotonic()  # (a deadline measures these steps)
                async with StopWatch(run):
                    if isinstance(step, CallModel):
                        await call_model(run, step)
                    else:
                        await run_tools(run, step)
                self.deadline.note_step(started)
            case StartTurn():
                await start_turn(run, step)
            case DiscardText():
                await discard_text(run, step)
            case InterruptTool():
                await interrupt_tool(run, step)
            case FinishTurn():
                await finish_turn(run, step)
            case RequestApproval():
                await request_approval(run, step)
            case TimeOutApproval():
                await time_out_approval(run, step)
            case StopTurn():
                await stop_turn(run, step)
