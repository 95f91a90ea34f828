"""The model step: one model call, its text saved as it streams, its reply saved
with its calls started.

Streamed text is saved in chunks (``text`` entries) as it arrives, so a client
that reconnects sees exactly the text the first client saw. The model's reply is
ONE append: its last text chunk, the ``message``, and then either the
``approval.requested`` entries of its calls that need approval and the
``tool.started`` entries of the others (they run right after it lands:
:mod:`fxworld.engine._run.tool_calls`), or, for a reply without calls,
``turn.finished``. Nothing can be lost between the reply and the start of its
calls, so they are saved together.

A call that cannot end as a reply marks its saved text ``text.discarded`` (the
conversation leaves it out): a model error (retried with backoff up to
``model_retries`` times when it is retryable, else the turn fails), an adapter
that raises, or a handover (SIGTERM: the next worker makes the call again). A
stop cuts the stream and keeps its saved text: ``turn.stopped`` carries it.

A reply the world refuses to save (its text or a call's input over the world's
entry limit: :mod:`fxworld.engine.unsaved`) ends the turn: its saved text is
discarded and ``turn.failed`` names the reply (or the answer), its size and the
limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from fxworld.errors import BackendUnavailable, Fenced, InvalidEntry
from fxworld.models.base import ModelError, ModelEvent, ModelRequest, ModelResponse, TextDelta
from fxworld.scrub import scrub
from fxworld.types import NewEntry

from .. import log
from ..limits import model_calls_spent
from ..replay import CallModel, CallState
from ..telemetry import Call
from ..unsaved import reply_refused
from .approval_wait import approval_entries
from .faults import crash_point
from .fenced import StopRun
from .signals import Cut
from .state import RunState, new_id
from .tool_calls import Run, run_started, start_entries
from .turn_edges import answer_entries

__all__ = ["call_model", "reply_entries"]

logger = logging.getLogger("fxworld.worker")


async def call_model(run: RunState, step: CallModel) -> None:
    """Call the model (again after a retryable error) until it replied, or the
    turn failed, or a signal cut the call; a turn that made as many model calls as
    its limit ends instead (:mod:`fxworld.engine.limits`)."""
    cur = run.state.current
    spent = None if cur is None else model_calls_spent(cur, run.agent.max_model_calls)
    if spent is not None:
        logger.warning("session %s: %s", run.sid, spent.data["error"])
        await run.writer.append([spent])
        return
    request = ModelRequest(
        instructions=run.instructions,
        messages=run.state.conversation(),
        tools=run.tool_specs,
    )
    attempt = 1
    while await _attempt(run, request, attempt):
        attempt += 1


async def _attempt(run: RunState, request: ModelRequest, attempt: int) -> bool:
    """One model call and the run of its calls; whether to make it again."""
    call = new_id()
    try:
        runs = await _traced(run, request, call)
    except Cut as cut:
        if cut.handover:  # the next worker makes the call again
            await _discard(run, call, "handover")
        return False  # a stop keeps the saved text; the step loop ends the turn
    except ModelError as e:
        return await _model_error(run, call, attempt, e)
    except InvalidEntry as e:  # its text, as it streamed, refused: nothing of it written
        await _refused(run, call, reply_refused(e, answer=False))
        return False
    except (Fenced, StopRun, BackendUnavailable):
        raise
    except Exception as e:  # an adapter bug must not crash-loop the session
        await _adapter_failed(run, call, e)
        return False
    if not run.signals.stop:  # a stop: no new tool starts (the stopped turn closes them)
        await run_started(run, runs)
    return False


async def _discard(run: RunState, call: str, reason: str) -> None:
    """Mark the text model call ``call`` saved as discarded, if it saved any."""
    cur = run.state.current
    if cur is not None and cur.open_call == call:
        await run.writer.append([log.entry(log.TEXT_DISCARDED, call=call, reason=reason)])


async def _fail_turn(run: RunState, error: str) -> None:
    cur = run.state.current
    assert cur is not None
    await run.writer.append(
        [log.entry(log.TURN_FAILED, prompt=cur.prompt, turn=cur.turn, error=error)]
    )


async def _model_error(run: RunState, call: str, attempt: int, e: ModelError) -> bool:
    """After a ``ModelError``: whether to call again (after a backoff no signal cut)."""
    message = scrub(str(e))  # the log is streamed to clients
    await _discard(run, call, f"model error: {message}")
    if e.retryable and attempt <= run.agent.model_retries:
        try:
            with run.signals.cutting():  # SIGTERM, or a stop
                await asyncio.sleep(min(0.5 * 2 ** (attempt - 1), 8.0))
        except Cut:
            return False  # the step loop hands the turn over (or ends it)
        return True
    logger.warning("session %s: the model call failed: %s", run.sid, e)
    await _fail_turn(run, message)
    return False


async def _refused(run: RunState, call: str, error: str) -> None:
    """The model's reply was refused by the world: the turn fails, naming it."""
    logger.warning("session %s: %s", run.sid, error)
    await _discard(run, call, "not saved")
    await _fail_turn(run, error)


async def _adapter_failed(run: RunState, call: str, e: Exception) -> None:
    logger.exception("session %s: model call raised", run.sid)
    await _discard(run, call, "model error")
    # The exception is in the server's log (above); the log, which clients
    # stream, gets a short message.
    await _fail_turn(
        run,
        f"the model call failed ({type(e).__name__}); the server's log has the details",
    )


async def _traced(run: RunState, request: ModelRequest, call: str) -> list[Run]:
    """:func:`_stream` inside the call's ``chat`` span."""
    span = run.telemetry.chat(run.agent.model)
    try:
        return await _stream(run, request, call, span)
    except BaseException as e:
        span.cut(type(e).__name__)
        raise
    finally:
        span.end()


async def _stream(run: RunState, request: ModelRequest, call: str, span: Call) -> list[Run]:
    """Stream one model call, saving its text in chunks; save the reply. The
    calls to run now. A signal cuts the stream at once (:class:`Cut`)."""
    text = _Text(run, call)
    stream = run.agent.model.stream(request)
    try:
        response = await _read(run, stream, text)
    finally:
        await text.close()
        await _close(stream)
    if response is None:
        raise ModelError("the model's stream ended without a response")
    span.response(response)
    crash_point("before-message")
    entries = text.rest()
    runs, wake = reply_entries(run, call, response, entries)
    try:
        await run.writer.append(entries, wake=wake)
    except InvalidEntry as e:  # nothing of the reply was written (W15)
        await _refused(run, call, reply_refused(e, answer=not response.tool_calls))
        return []
    crash_point("after-message")
    asked = sum(e.kind == log.APPROVAL_REQUESTED for e in entries)
    if asked:
        run.telemetry.approvals(asked)
        crash_point("after-approval-requested")
    return runs


async def _read(
    run: RunState, stream: AsyncIterator[ModelEvent], text: _Text
) -> ModelResponse | None:
    """The stream's events until its end: text is gathered (and saved in chunks);
    the response, if one came."""
    response: ModelResponse | None = None
    while True:
        try:
            with run.signals.cutting():
                item = await anext(stream, None)
        except Cut as cut:
            if not cut.handover:
                await text.save()  # what arrived stays, with what was saved
            raise
        if item is None:
            return response
        if isinstance(item, TextDelta):
            if item.text and text.add(item.text):
                await text.save()
        elif isinstance(item, ModelResponse):
            response = item


async def _close(stream: AsyncIterator[ModelEvent]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()


class _Text:
    """The text of one model call not saved yet. It is saved whenever
    ``text_chunk_chars`` have gathered, or ``text_chunk_interval`` seconds after
    the oldest unsaved text arrived: when the model is silent by then, a timer
    saves it beside the stream (one save at a time, in order)."""

    def __init__(self, run: RunState, call: str) -> None:
        self.run = run
        self.call = call
        self.parts: list[str] = []
        self.size = 0
        self.oldest = 0.0  # when the oldest unsaved text arrived
        self.timer: asyncio.TimerHandle | None = None
        self.saving: asyncio.Task[None] | None = None  # a save beside the stream

    def add(self, piece: str) -> bool:
        """Gather ``piece``; whether a chunk is due now."""
        now = time.monotonic()
        if not self.parts:
            self.oldest = now
        self.parts.append(piece)
        self.size += len(piece)
        interval = self.run.agent.text_chunk_interval
        if self.size >= self.run.agent.text_chunk_chars or now - self.oldest >= interval:
            return True
        if self.timer is None:
            delay = self.oldest + interval - now
            self.timer = asyncio.get_running_loop().call_later(delay, self._save_beside)
        return False

    def _take(self) -> NewEntry | None:
        """The gathered text as one ``text`` entry (and nothing gathered any more)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if not self.parts:
            return None
        entry = log.entry(log.TEXT, call=self.call, text="".join(self.parts))
        self.parts, self.size = [], 0
        return entry

    def _save_beside(self) -> None:
        """The timer: the interval passed while the model was silent."""
        self.timer = None
        entry = self._take()
        if entry is not None:
            self.saving = asyncio.create_task(self._append(entry, self.saving))

    async def _append(self, entry: NewEntry, after: asyncio.Task[None] | None = None) -> None:
        if after is not None:
            await after
        await self.run.writer.append([entry])
        crash_point("after-chunk")

    async def _settle(self) -> None:
        """Wait for a save beside the stream (its errors are this call's)."""
        saving, self.saving = self.saving, None
        if saving is not None:
            await saving

    async def save(self) -> None:
        """Save what was gathered, after any save under way."""
        await self._settle()
        entry = self._take()
        if entry is not None:
            await self._append(entry)

    def rest(self) -> list[NewEntry]:
        """The text not saved yet, as the first entries of the reply's append."""
        entry = self._take()
        return [] if entry is None else [entry]

    async def close(self) -> None:
        """The stream ended (or failed): no timer; a save under way lands first."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        await self._settle()


def reply_entries(
    run: RunState, call: str, response: ModelResponse, entries: list[NewEntry]
) -> tuple[list[Run], float | None]:
    """Add the entries of the model's reply to ``entries``, for ONE append (see
    the module). Returns the calls to run once that append has landed, and the
    delay of the wake that lands with it (an approval's timeout), if any."""
    cur = run.state.current
    assert cur is not None
    calls = [CallState(tc.id, tc.name, tc.input, new_id(32)) for tc in response.tool_calls]
    entries.append(_message(run, call, response, calls))
    if not calls:  # the answer: the turn ends, or the model answers again (typed_output)
        entries.extend(answer_entries(run, call, response.text))
        return [], None
    tools = run.agent.tools
    asks = [c for c in calls if c.name in tools and tools[c.name].needs_approval]
    wake = None
    if asks:  # such a call is not started: it waits for its decision
        requested, wake = approval_entries(tools, asks)
        entries.extend(requested)
    started, runs = start_entries(tools, [(c, 1) for c in calls if c not in asks])
    entries.extend(started)
    return runs, wake


def _message(run: RunState, call: str, response: ModelResponse, calls: list[CallState]) -> NewEntry:
    usage = response.usage
    return log.entry(
        log.MESSAGE,
        call=call,
        model=getattr(run.agent.model, "name", ""),
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
