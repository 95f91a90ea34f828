"""The worker: takes wakes and runs sessions' turns, one fenced step at a time.

For each wake it takes, a worker ``acquire``s the session (a new fence; any older
holder is refused from then on), rebuilds the state by reading the log
(:mod:`fxworld.engine.replay`), and then repeats: decide the next step from the
state, do it, append what happened with its fence. The lease is renewed in the
background. ``Fenced`` means another worker replaced this one: it stops at once,
with no further write and no further side effect. ``BackendUnavailable`` is retried
with backoff; a fenced append whose outcome is unknown is checked by reading the
log (only this fence writes entries of its epoch), so nothing is doubled.

Durable writes per step: the model's reply is ONE append: its last text chunk,
the ``message``, and then either the ``tool.started`` entries of all its calls
(they run right after it lands) or, for a reply without calls, ``turn.finished``.
Each ``tool.finished`` is appended as that call ends (results of parallel calls
that end while another is being appended share the next append), all before the
next model call begins, so a finished call's result is never lost. A tool step
costs two appends. Parallel tool calls (several calls in one message) run at the
same time. After a crash, each call that was started and not finished is handled
on its own (run again, or reported).

SIGTERM (``Worker.stop``): a running model call is abandoned at once (its text is
marked discarded, the call is made again by the next worker); a running tool is
let finish; then ``turn.yielded`` is appended with a wake and the lease is
released, so another worker continues at once.

Approvals and stop (:mod:`fxworld.engine.worker_approvals`, mixed into the
session run): a call of a tool with ``needs_approval`` is parked with
``approval.requested``; when only such calls are left, the run finishes its wake
and holds nothing until a decision brings a worker back. While it runs a session,
a worker follows the session's log for ``stop.requested``: the model stream is
cut (its saved text stays), no new tool starts, an async tool is cancelled, a sync
one is let finish, and ``turn.stopped`` ends the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from fxworld._scrub import error_text, scrub
from fxworld.errors import BackendUnavailable, Fenced
from fxworld.models.base import (
    ModelError,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolSpec,
)
from fxworld.protocol import World
from fxworld.types import Fence, NewEntry, WakeLease

from . import log
from ._faults import crash_point
from .fenced import FencedWriter, StopRun
from .replay import (
    CallModel,
    CallState,
    DiscardText,
    FinishTurn,
    Idle,
    InterruptTool,
    RequestApproval,
    RunTools,
    StartTurn,
    Step,
    StopTurn,
    TimeOutApproval,
    WaitForApproval,
    interrupted_message,
    next_step,
    stopped_message,
)
from .tools import ToolContext, render_output
from .worker_approvals import ApprovalAndStop

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["Worker"]

logger = logging.getLogger("fxworld.worker")
T = TypeVar("T")


def _tool_entry(kind: str, c: CallState, **data: Any) -> NewEntry:
    """A ``tool.*`` entry of call ``c``: its execution id, call id and name, then ``data``."""
    return log.entry(kind, execution_id=c.execution_id, call_id=c.id, name=c.name, **data)


class _Handover(Exception):
    """Abort the model stream: the worker is shutting down."""


class _Cut(Exception):
    """Abort the model stream: the user stopped the turn (its saved text stays)."""


class Worker:
    """One ``agent.work()`` loop. See :meth:`fxworld.engine.agent.Agent.work`."""

    def __init__(
        self,
        agent: Agent,
        *,
        concurrency: int,
        lease: float,
        deadline: float | None,
        until_idle: bool,
        poll_interval: float,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if lease <= 0:
            raise ValueError("lease must be > 0 seconds")
        self.agent = agent
        self.concurrency = concurrency
        self.lease = lease
        self.budget = deadline
        self.until_idle = until_idle
        self.poll_interval = poll_interval
        self.deadline_at: float | None = None  # time.monotonic() based
        self.stopping = asyncio.Event()
        self.longest_step = 0.0
        # A session yielded at the deadline: no step fits any more, so no wake is
        # taken after it (taking one back would only fence and yield it again).
        self.hit_deadline = False

    def stop(self) -> None:
        """Stop at the next step boundary and hand running sessions back."""
        self.stopping.set()

    def time_left(self) -> float | None:
        if self.deadline_at is None:
            return None
        return self.deadline_at - time.monotonic()

    async def run(self, *, handle_signals: bool = False) -> None:
        if self.budget is not None:
            self.deadline_at = time.monotonic() + self.budget
        world = await self.agent._ready_world()
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, self._on_signal)
                    installed.append(sig)
        tasks: set[asyncio.Task[None]] = set()
        wait = 0.01
        logger.info(
            "worker ready: taking wakes (concurrency %d, lease %.1fs%s)",
            self.concurrency,
            self.lease,
            "" if self.budget is None else f", deadline in {self.budget:.1f}s",
        )
        try:
            while not self.stopping.is_set():
                left = self.time_left()
                # too close to the deadline, or a turn already yielded to it
                no_new_work = self.hit_deadline or (left is not None and left <= 0.5)
                if (left is not None and left <= 0) or (no_new_work and not tasks):
                    break
                took = False
                if len(tasks) < self.concurrency and not no_new_work:
                    try:
                        wl = await world.take_wake(lease=self.lease)
                    except BackendUnavailable as e:
                        logger.warning("take_wake failed, retrying: %s", e)
                        wl = None
                    if wl is not None:
                        took = True
                        run = _SessionRun(self, world, wl)
                        task = asyncio.create_task(run.go(), name=f"fxworld:{wl.session_id}")
                        tasks.add(task)
                        task.add_done_callback(tasks.discard)
                        wait = 0.01
                        continue
                    if self.until_idle and not tasks:
                        break
                if not took:
                    await self._pause(tasks, wait)
                    wait = min(wait * 2, self.poll_interval)
        finally:
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            for sig in installed:
                loop.remove_signal_handler(sig)

    def _on_signal(self) -> None:
        if self.stopping.is_set():  # a second signal: leave now
            raise SystemExit(130)
        logger.info("signal received: handing sessions back at the next step boundary")
        self.stop()

    async def _pause(self, tasks: set[asyncio.Task[None]], seconds: float) -> None:
        waiters: list[asyncio.Future[Any]] = [asyncio.ensure_future(self.stopping.wait())]
        if len(tasks) >= self.concurrency:
            waiters.extend(tasks)
        else:
            waiters.append(asyncio.ensure_future(asyncio.sleep(seconds)))
        _done, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for f in pending:
            if f not in tasks:
                f.cancel()


class _SessionRun(ApprovalAndStop):
    """One delivery of one session's wake: acquire, replay, steps, hand back."""

    def __init__(self, worker: Worker, world: World, wake: WakeLease) -> None:
        self.worker = worker
        self.agent = worker.agent
        self.world = world
        self.wake = wake
        self.sid = wake.session_id
        self.writer = FencedWriter(world, wake, lease=worker.lease)
        self.writer.on_news = self._note_stop
        self.state = self.writer.state
        self.tool_specs: tuple[ToolSpec, ...] | None = None
        self.stop_seen = asyncio.Event()  # a stop.requested for the current turn landed
        self._stop_cancelled: set[str] = set()  # execution ids cancelled by a stop

    async def go(self) -> None:
        renewer = asyncio.create_task(self.writer.renew())
        try:
            await self._go()
        except StopRun as e:
            logger.info("session %s: stopped: %s", self.sid, e)
        except Fenced:
            logger.info("session %s: replaced by another worker; stopping", self.sid)
        except Exception:
            logger.exception("session %s: run failed; its lease will expire and retry", self.sid)
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer

    async def _go(self) -> None:
        if await self._nothing_to_do():
            return
        fence = await self.writer.acquire()
        logger.info(
            "session %s: taken (delivery %d, epoch %d)",
            self.sid,
            self.wake.attempt,
            fence.epoch,
        )
        await self._catch_up()
        cur = self.state.current
        if cur is not None and self.wake.attempt > self.agent.max_deliveries:
            await self._append(
                [
                    log.entry(
                        log.TURN_FAILED,
                        prompt=cur.prompt,
                        turn=cur.turn,
                        error=f"gave up: the turn was delivered {self.wake.attempt} times and "
                        "each worker died or hung before it ended",
                    )
                ]
            )
        tools = self.agent.tools
        idempotent = {name: t.idempotent for name, t in tools.items()}
        timeouts = {name: t.approval_timeout for name, t in tools.items() if t.needs_approval}
        while True:
            if self.writer.lease_lost:
                raise StopRun("lease lost")
            if self.stop_seen.is_set():
                self.stop_seen.clear()
                await self._catch_up()
            step = next_step(self.state, idempotent, timeouts)
            if isinstance(step, Idle):
                break
            if isinstance(step, WaitForApproval):
                await self._wait_for_approval(step)
                break
            reason = self._must_yield(step)
            if reason is not None:
                await self._yield(reason)
                return
            await self._do(step)
        await self._finish_wake()

    # -- the steps ---------------------------------------------------------------------

    def _must_yield(self, step: Step) -> str | None:
        if self.worker.stopping.is_set():
            return "handover"
        left = self.worker.time_left()
        if left is None:
            return None
        needs = 0.0
        if isinstance(step, (CallModel, RunTools)):
            needs = max(self.worker.longest_step, 0.5)
        return "deadline" if left <= needs else None

    async def _yield(self, reason: str) -> None:
        if reason == "deadline":
            self.worker.hit_deadline = True
        cur = self.state.current
        if cur is not None:
            await self._append(
                [log.entry(log.TURN_YIELDED, prompt=cur.prompt, turn=cur.turn, reason=reason)],
                wake=0.0,
            )
        else:
            await self._retry(lambda: self.world.wake(self.sid, delay=0.0))
        await self._finish_wake()

    async def _do(self, step: Step) -> None:
        cur = self.state.current
        if isinstance(step, StartTurn):
            await self._append(
                [log.entry(log.TURN_STARTED, prompt=step.prompt, turn=uuid.uuid4().hex[:16])]
            )
            crash_point("after-turn-started")
            return
        assert cur is not None
        if isinstance(step, DiscardText):
            await self._append([log.entry(log.TEXT_DISCARDED, call=step.call, reason="cut")])
        elif isinstance(step, InterruptTool):
            c = step.call
            message = interrupted_message(c.name, c.execution_id)
            await self._append([_tool_entry(log.TOOL_INTERRUPTED, c, message=message)])
        elif isinstance(step, RunTools):
            started = time.monotonic()
            async with self._watching_for_stop():
                await self._run_tools(step)
            self._note_step(started)
        elif isinstance(step, CallModel):
            started = time.monotonic()
            async with self._watching_for_stop():
                await self._call_model(cur.prompt, cur.turn)
            self._note_step(started)
        elif isinstance(step, (RequestApproval, TimeOutApproval, StopTurn)):
            await self._do_approval_or_stop(step)
        elif isinstance(step, FinishTurn):
            crash_point("before-turn-finished")
            await self._append(
                [log.entry(log.TURN_FINISHED, prompt=cur.prompt, turn=cur.turn, text=step.text)]
            )

    def _call_open(self, call: str) -> bool:
        """Whether model call ``call`` saved text that no entry closed yet."""
        return self.state.current is not None and self.state.current.open_call == call

    def _note_step(self, started: float) -> None:
        self.worker.longest_step = max(self.worker.longest_step, time.monotonic() - started)

    async def _run_tools(self, step: RunTools) -> None:
        """Calls found to run after a replay (never started, or idempotent ones to
        run again): their ``tool.started`` entries in one append, then the runs."""
        if self.stop_seen.is_set():
            return  # a stop landed: no new tool starts (the step loop ends the turn)
        entries, runs = self._start_entries(step.runs)
        if any(c.approval == "approved" for c, _ in runs):
            crash_point("before-approved-call")
        await self._append(entries)
        crash_point("after-tool-started")
        await self._run_started(runs)

    def _start_entries(
        self, calls: Sequence[tuple[CallState, int]]
    ) -> tuple[list[NewEntry], list[tuple[CallState, int]]]:
        """What to append before calls run: ``tool.started`` for each known tool (its
        run follows), ``tool.finished`` with an error for each unknown one; and the
        calls that then run."""
        tools = self.agent.tools
        entries: list[NewEntry] = []
        runs: list[tuple[CallState, int]] = []
        for c, attempt in calls:
            if c.name in tools:
                entries.append(_tool_entry(log.TOOL_STARTED, c, input=c.input, attempt=attempt))
                runs.append((c, attempt))
            else:
                output = f"unknown tool {c.name!r}; available: {sorted(tools)}"
                entries.append(_tool_entry(log.TOOL_FINISHED, c, output=output, is_error=True))
        return entries, runs

    async def _run_started(self, runs: Sequence[tuple[CallState, int]]) -> None:
        """Run calls whose ``tool.started`` is saved, at the same time; each
        ``tool.finished`` is appended as that call ends (results that come while
        another is being appended go together in the next append)."""
        if not runs:
            return
        tools = self.agent.tools
        lock = asyncio.Lock()
        finished: list[NewEntry] = []

        calls: dict[str, tuple[str, asyncio.Future[Any]]] = {}  # execution id -> tool, call

        async def run_one(c: CallState, attempt: int) -> None:
            ctx = ToolContext(c.execution_id, self.sid, c.id, c.name, attempt)
            entry: NewEntry
            try:
                running = asyncio.ensure_future(tools[c.name].call(c.input, ctx))
                calls[c.execution_id] = (c.name, running)
                output = render_output(await running)
                entry = _tool_entry(log.TOOL_FINISHED, c, output=output, is_error=False)
            except asyncio.CancelledError:
                if c.execution_id not in self._stop_cancelled:
                    raise
                entry = _tool_entry(log.TOOL_INTERRUPTED, c, message=stopped_message(c.name))
            except Exception as e:  # a tool that raises is a result the model sees
                logger.info("session %s: tool %s raised", self.sid, c.name, exc_info=True)
                # scrubbed: the log is streamed to clients
                entry = _tool_entry(log.TOOL_FINISHED, c, output=error_text(e), is_error=True)
            finished.append(entry)
            async with lock:
                if not finished:
                    return  # appended with another call's result
                batch = finished[:]
                finished.clear()
                await self._append(batch)
                crash_point("after-tool-finished")

        if len(runs) == 1 and not inspect.iscoroutinefunction(tools[runs[0][0].name].fn):
            await run_one(*runs[0])  # the common case: no task to make (a stop lets a
            return  # sync call finish, so nothing watches for one)
        tasks = [asyncio.create_task(run_one(c, attempt)) for c, attempt in runs]
        cutter = asyncio.create_task(self._cancel_async_calls_on_stop(calls))
        try:
            await asyncio.gather(*tasks)
        finally:  # replaced (Fenced) or stopped: nothing more of this step runs
            for t in [cutter, *tasks]:
                t.cancel()
            await asyncio.gather(cutter, *tasks, return_exceptions=True)

    async def _call_model(self, prompt: int, turn: str) -> None:
        if self.tool_specs is None:
            self.tool_specs = tuple(t.spec for t in self.agent.tools.values())
        request = ModelRequest(
            instructions=self.agent.instructions,
            messages=self.state.conversation(),
            tools=self.tool_specs,
        )
        attempt = 0
        while True:
            attempt += 1
            call = uuid.uuid4().hex[:16]
            wrote_text = False
            try:
                runs, wrote_text = await self._stream_model(request, call)
            except _Cut:
                return  # its saved text stays; the step loop ends the turn
            except _Handover:
                if self._call_open(call):
                    await self._append(
                        [log.entry(log.TEXT_DISCARDED, call=call, reason="handover")]
                    )
                return  # the loop sees the stop flag and yields
            except ModelError as e:
                message = scrub(str(e))  # the log is streamed to clients
                if wrote_text or (self._call_open(call)):
                    await self._append(
                        [log.entry(log.TEXT_DISCARDED, call=call, reason=f"model error: {message}")]
                    )
                if e.retryable and attempt <= self.agent.model_retries:
                    backoff = min(0.5 * 2 ** (attempt - 1), 8.0)
                    events = (self.worker.stopping, self.stop_seen)  # SIGTERM, or a stop
                    waits = [asyncio.ensure_future(e.wait()) for e in events]
                    await asyncio.wait(waits, timeout=backoff, return_when=asyncio.FIRST_COMPLETED)
                    for w in waits:
                        w.cancel()
                    if any(e.is_set() for e in events):
                        return  # the step loop hands the turn over (or ends it)
                    continue
                logger.warning("session %s: the model call failed: %s", self.sid, e)
                await self._append(
                    [log.entry(log.TURN_FAILED, prompt=prompt, turn=turn, error=message)]
                )
                return
            except (Fenced, StopRun, BackendUnavailable):
                raise
            except Exception as e:  # an adapter bug must not crash-loop the session
                logger.exception("session %s: model call raised", self.sid)
                if self._call_open(call):
                    await self._append(
                        [log.entry(log.TEXT_DISCARDED, call=call, reason="model error")]
                    )
                await self._append(
                    [
                        log.entry(
                            log.TURN_FAILED,
                            prompt=prompt,
                            turn=turn,
                            # The exception is in the server's log (above); the
                            # log, which clients stream, gets a short message.
                            error=f"the model call failed ({type(e).__name__}); "
                            "the server's log has the details",
                        )
                    ]
                )
                return
            # the reply is saved with its calls started: run them now (also when a
            # stop was asked meanwhile: a started call left unrun would be reported
            # as maybe partly run)
            if self.stop_seen.is_set():
                return  # no new tool starts: the stopped turn closes the calls
            await self._run_started(runs)
            return

    async def _stream_model(
        self, request: ModelRequest, call: str
    ) -> tuple[list[tuple[CallState, int]], bool]:
        """Stream one model call, saving its text in chunks: whenever
        ``text_chunk_chars`` have gathered, or ``text_chunk_interval`` seconds have
        passed since the oldest unsaved text arrived (also while the model is
        silent). A stop request (SIGTERM) aborts the call at once."""
        queue: asyncio.Queue[ModelEvent | BaseException | None] = asyncio.Queue()
        pump = asyncio.create_task(self._pump(request, queue))
        # made when the model keeps us waiting: SIGTERM, and a stop of this turn
        stopping: asyncio.Task[bool] | None = None
        cut: asyncio.Task[bool] | None = None
        buf: list[str] = []
        size = 0
        oldest = 0.0  # when the oldest unsaved text arrived
        response: ModelResponse | None = None
        wrote = False
        interval = self.agent.text_chunk_interval

        async def flush() -> None:
            nonlocal buf, size, wrote
            await self._append([log.entry(log.TEXT, call=call, text="".join(buf))])
            wrote = True
            buf, size = [], 0
            crash_point("after-chunk")

        try:
            while True:
                if not queue.empty():  # the common case: no task, no wait
                    item = queue.get_nowait()
                else:
                    timeout = None if not buf else max(0.0, oldest + interval - time.monotonic())
                    if stopping is None or cut is None:
                        stopping = asyncio.create_task(self.worker.stopping.wait())
                        cut = asyncio.create_task(self.stop_seen.wait())
                    get = asyncio.create_task(queue.get())
                    done, _ = await asyncio.wait(
                        {get, stopping, cut}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                    )
                    if get not in done:
                        get.cancel()
                        if cut in done:
                            if buf:
                                await flush()  # what arrived stays, with what was saved
                            raise _Cut()
                        if stopping in done:
                            raise _Handover()
                        await flush()  # the interval passed while the model was silent
                        continue
                    item = get.result()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                if self.worker.stopping.is_set():
                    raise _Handover()
                if self.stop_seen.is_set():
                    if buf:
                        await flush()  # what arrived stays, with what was saved
                    raise _Cut()
                if isinstance(item, TextDelta):
                    if not item.text:
                        continue
                    if not buf:
                        oldest = time.monotonic()
                    buf.append(item.text)
                    size += len(item.text)
                    if size >= self.agent.text_chunk_chars or time.monotonic() - oldest >= interval:
                        await flush()
                elif isinstance(item, ModelResponse):
                    response = item
        finally:
            pump.cancel()
            for waiter in (stopping, cut):
                if waiter is not None:
                    waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pump
        if response is None:
            raise ModelError("the model's stream ended without a response")
        crash_point("before-message")
        entries: list[NewEntry] = []
        if buf:
            entries.append(log.entry(log.TEXT, call=call, text="".join(buf)))
        runs, wake = self._reply_entries(call, response, entries)
        await self._append(entries, wake=wake)
        crash_point("after-message")
        if any(e.kind == log.APPROVAL_REQUESTED for e in entries):
            crash_point("after-approval-requested")
        return runs, wrote

    def _reply_entries(
        self, call: str, response: ModelResponse, entries: list[NewEntry]
    ) -> tuple[list[tuple[CallState, int]], float | None]:
        """Add the entries of the model's reply to ``entries``, for ONE append: the
        ``message``, then either the ``approval.requested`` entries of its calls that
        need approval and the ``tool.started`` entries of the others (nothing can be
        lost between the reply and the start of its calls, so they are saved
        together), or, for a reply without calls, ``turn.finished``. Returns the
        calls to run once that append has landed, and the delay of the wake that
        lands with it (an approval's timeout), if any."""
        cur = self.state.current
        assert cur is not None
        calls = [
            CallState(tc.id, tc.name, tc.input, uuid.uuid4().hex) for tc in response.tool_calls
        ]
        usage = response.usage
        entries.append(
            log.entry(
                log.MESSAGE,
                call=call,
                model=getattr(self.agent.model, "name", ""),
                text=response.text,
                tool_calls=[
                    {"id": c.id, "name": c.name, "input": c.input, "execution_id": c.execution_id}
                    for c in calls
                ],
                usage=None
                if usage is None
                else {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
                stop_reason=response.stop_reason,
            )
        )
        if not calls:
            entries.append(
                log.entry(log.TURN_FINISHED, prompt=cur.prompt, turn=cur.turn, text=response.text)
            )
            return [], None
        tools = self.agent.tools
        asks = [c for c in calls if c.name in tools and tools[c.name].needs_approval]
        wake = None
        if asks:  # such a call is not started: it waits for its decision
            requested, wake = self._approval_entries(asks)
            entries.extend(requested)
        started, runs = self._start_entries([(c, 1) for c in calls if c not in asks])
        entries.extend(started)
        return runs, wake

    async def _pump(
        self, request: ModelRequest, queue: asyncio.Queue[ModelEvent | BaseException | None]
    ) -> None:
        stream = self.agent.model.stream(request)
        try:
            async for event in stream:
                await queue.put(event)
            await queue.put(None)
        except Exception as e:
            await queue.put(e)
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()

    # -- the world, carefully (fxworld.engine.fenced) ---------------------------------

    @property
    def fence(self) -> Fence | None:  # type: ignore[override]
        return self.writer.fence

    async def _append(self, entries: Sequence[NewEntry], *, wake: float | None = None) -> int:
        return await self.writer.append(entries, wake=wake)

    async def _catch_up(self) -> None:
        await self.writer.catch_up()

    async def _retry(self, op: Callable[[], Awaitable[T]]) -> T:
        return await self.writer.retry(op)

    async def _finish_wake(self) -> None:
        await self.writer.finish_wake()
