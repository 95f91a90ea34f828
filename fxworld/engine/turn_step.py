"""The steps that write one entry of the turn: start it, close what a crash left
open, finish it, give it up, or yield it to another worker.

- ``StartTurn``: ``turn.started`` for the oldest prompt no turn answered yet
  (prompts sent while a turn runs wait their turn, in order).
- ``DiscardText``: a model call cut by a crash saved text but no reply: its text
  is marked ``text.discarded`` (never silently repeated) and the call is made again.
- ``InterruptTool``: a non-idempotent call found started and not finished is NOT
  run again: ``tool.interrupted`` tells the model it may have partly run.
- ``FinishTurn``: a reply saved without its ``turn.finished`` (logs of older versions).
- The yield: at a handover (SIGTERM) or before a step that would outrun the
  deadline, ``turn.yielded`` lands with a wake (W7), so another worker, or the
  next invocation, continues the turn at once.
- A turn delivered more than ``max_deliveries`` times (each worker died or hung
  on it) ends with ``turn.failed`` instead of crashing workers forever.
"""

from __future__ import annotations

from . import log
from .context import RunContext, new_id
from .faults import crash_point
from .replay import DiscardText, FinishTurn, InterruptTool, StartTurn, interrupted_message
from .tool_step import tool_entry

__all__ = [
    "start_turn",
    "discard_text",
    "interrupt_tool",
    "finish_turn",
    "yield_turn",
    "give_up_if_redelivered",
]


async def start_turn(run: RunContext, step: StartTurn) -> None:
    trace = run.telemetry.turn_trace()  # a worker that takes the turn over links to it
    entry = log.entry(log.TURN_STARTED, prompt=step.prompt, turn=new_id(), **trace)
    await run.writer.append([entry])
    crash_point("after-turn-started")


async def discard_text(run: RunContext, step: DiscardText) -> None:
    await run.writer.append([log.entry(log.TEXT_DISCARDED, call=step.call, reason="cut")])


async def interrupt_tool(run: RunContext, step: InterruptTool) -> None:
    c = step.call
    message = interrupted_message(c.name, c.execution_id)
    await run.writer.append([tool_entry(log.TOOL_INTERRUPTED, c, message=message)])


async def finish_turn(run: RunContext, step: FinishTurn) -> None:
    cur = run.state.current
    assert cur is not None
    crash_point("before-turn-finished")
    await run.writer.append(
        [log.entry(log.TURN_FINISHED, prompt=cur.prompt, turn=cur.turn, text=step.text)]
    )


async def yield_turn(run: RunContext, reason: str) -> None:
    """Hand the session on (``reason``: ``"handover"`` or ``"deadline"``) and finish
    the wake: the new wake lands with ``turn.yielded`` (W7)."""
    cur = run.state.current
    if cur is not None:
        entry = log.entry(log.TURN_YIELDED, prompt=cur.prompt, turn=cur.turn, reason=reason)
        await run.writer.append([entry], wake=0.0)
    else:
        await run.writer.wake_again(0.0)
    await run.writer.finish_wake()


async def give_up_if_redelivered(run: RunContext) -> None:
    """``turn.failed`` for a turn delivered more than ``max_deliveries`` times."""
    cur = run.state.current
    attempt = run.writer.wake.attempt
    if cur is None or attempt <= run.agent.max_deliveries:
        return
    error = (
        f"gave up: the turn was delivered {attempt} times and "
        "each worker died or hung before it ended"
    )
    await run.writer.append(
        [log.entry(log.TURN_FAILED, prompt=cur.prompt, turn=cur.turn, error=error)]
    )
