"""The steps that write one entry of the turn: start it, close what a crash left
open, finish it, give it up, or yield it to another worker.

- ``StartTurn``: ``turn.started`` for the oldest prompt no turn answered yet
  (prompts sent while a turn runs wait their turn, in order).
- ``DiscardText``: a model call cut by a crash saved text but no reply: its text
  is marked ``text.discarded`` (never silently repeated) and the call is made again.
- ``InterruptTool``: a non-idempotent call found started and not finished is NOT
  run again: ``tool.interrupted`` tells the model it may have partly run.
- ``FinishTurn``: a reply saved without its ``turn.finished`` (logs of older versions).
- The answer (:func:`answer_entries`): ``turn.finished``, its ``output`` validated
  against the agent's ``output_type`` (then without ``text``: the answer's text is
  its ``message``'s, not saved twice); or ``output.invalid`` and the model answers
  again; or, after ``output_retries`` of them, ``turn.failed``.
- A turn of a session whose context does not fit the agent's ``context_type``
  fails at its start: no tool runs with it.
- The yield: at a handover (SIGTERM) or before a step that would outrun the
  deadline, ``turn.yielded`` lands with a wake (W7), so another worker, or the
  next invocation, continues the turn at once; on a pushing world
  (:class:`~fxworld.push.PushingWorld`) that wake is pushed once the lease is
  finished, and the yield says whether it was (the run then ended ``"yielded"``).
- A turn delivered more than ``max_deliveries`` times (each worker died or hung
  on it) ends with ``turn.failed`` instead of crashing workers forever; so does a
  prompt whose turn never got to start (started and failed at once).
- A turn of a child session whose agent the worker does not find (a deploy
  without its agent tool) fails, at its start or where it stands.
- The first turn of a child session whose parent no longer waits for it
  (:func:`~fxworld.engine._run.children.parent_moved_on`) is stopped at its start:
  no model call, no tool.
"""

from __future__ import annotations

from fxworld.push.world import PushingWorld
from fxworld.types import NewEntry

from .. import log
from ..context import short_errors
from ..replay import DiscardText, FinishTurn, InterruptTool, StartTurn, interrupted_message
from ..typed_output import check_output, type_name
from .children import parent_moved_on
from .faults import crash_point
from .state import RunState, new_id
from .tool_calls import tool_entry

__all__ = [
    "start_turn",
    "discard_text",
    "interrupt_tool",
    "finish_turn",
    "yield_turn",
    "give_up_if_redelivered",
    "fail_refused",
    "answer_entries",
]


async def start_turn(run: RunState, step: StartTurn) -> None:
    crash_point("before-turn-started")
    trace = run.telemetry.turn_trace()  # a worker that takes the turn over links to it
    turn = new_id()
    entries = [log.entry(log.TURN_STARTED, prompt=step.prompt, turn=turn, **trace)]
    refused = _context_refused(run)
    if refused:
        entries.append(log.entry(log.TURN_FAILED, prompt=step.prompt, turn=turn, error=refused))
    elif step.prompt == 1 and run.state.parent is not None:  # a child's first turn
        moved = await parent_moved_on(run)
        if moved:
            stopped = log.entry(log.TURN_STOPPED, prompt=1, turn=turn, text="", reason=moved)
            entries.append(stopped)
    await run.writer.append(entries)
    crash_point("after-turn-started")


def _context_refused(run: RunState) -> str:
    """Why the session's context does not fit the agent's ``context_type``, or no
    agent runs it ("": it runs)."""
    if run.refusal:
        return run.refusal
    if run.agent.context_type is None:
        return ""
    import pydantic

    try:
        run.context  # noqa: B018 (parsed: the tools read it)
    except pydantic.ValidationError as e:
        return (
            f"the session's context does not match {run.agent.context_type.__name__}: "
            f"{short_errors(e)}"
        )
    return ""


def answer_entries(run: RunState, call: str, text: str) -> list[NewEntry]:
    """The entries that follow the answer ``text`` of model call ``call`` (a reply
    without tool calls), in the same append: ``turn.finished``; with an
    ``output_type``, its ``output`` once ``text`` validates, else ``output.invalid``
    (the model answers again), and ``turn.failed`` once ``output_retries`` answers
    were refused."""
    cur = run.state.current
    assert cur is not None
    output_type = run.agent.output_type
    if output_type is None:
        return [log.entry(log.TURN_FINISHED, prompt=cur.prompt, turn=cur.turn, text=text)]
    output, error = check_output(output_type, text)
    if output is not None:  # (its text is the message's, saved once: not again here)
        return [log.entry(log.TURN_FINISHED, prompt=cur.prompt, turn=cur.turn, output=output)]
    entries = [log.entry(log.OUTPUT_INVALID, call=call, error=error)]
    if cur.output_tries >= run.agent.output_retries:
        failed = (
            f"the answer did not match {type_name(output_type)} after "
            f"{cur.output_tries + 1} tries: {error}"
        )
        entries.append(log.entry(log.TURN_FAILED, prompt=cur.prompt, turn=cur.turn, error=failed))
    return entries


async def discard_text(run: RunState, step: DiscardText) -> None:
    await run.writer.append([log.entry(log.TEXT_DISCARDED, call=step.call, reason="cut")])


async def interrupt_tool(run: RunState, step: InterruptTool) -> None:
    c = step.call
    message = interrupted_message(c.name, c.execution_id, list(c.step_results), c.steps_cut)
    await run.writer.append([tool_entry(log.TOOL_INTERRUPTED, c, message=message)])


async def finish_turn(run: RunState, step: FinishTurn) -> None:
    cur = run.state.current
    assert cur is not None
    crash_point("before-turn-finished")
    await run.writer.append(answer_entries(run, cur.last_call, step.text))


async def yield_turn(run: RunState, reason: str) -> bool:
    """Hand the session on (``reason``: ``"handover"`` or ``"deadline"``) and finish
    the wake: the new wake lands with ``turn.yielded`` (W7; before a turn started,
    alone: W11). Whether that wake was pushed: the world pushes (a
    :class:`~fxworld.push.PushingWorld`) and no push of it failed meanwhile (a
    failure of another session's push in this process counts too: then the
    consumer keeps its delivery, which is harmless)."""
    world = run.writer.world
    failed = world.stats.failed if isinstance(world, PushingWorld) else None
    cur = run.state.current
    if cur is not None:
        entry = log.entry(log.TURN_YIELDED, prompt=cur.prompt, turn=cur.turn, reason=reason)
        await run.writer.append([entry], wake=0.0)
    else:
        await run.writer.wake_again(0.0)
    await run.writer.finish_wake()  # a pushing world sends the wake's message now
    return isinstance(world, PushingWorld) and world.stats.failed == failed


async def give_up_if_redelivered(run: RunState) -> None:
    """``turn.failed`` for a turn delivered more than ``max_deliveries`` times; for
    a prompt whose turn never started (each run died before ``turn.started``), its
    turn is started and failed at once, so a crash before the turn starts ends
    too (a queue would deliver it forever)."""
    cur = run.state.current
    attempt = run.writer.wake.attempt
    if attempt <= run.agent.max_deliveries:
        return
    if cur is not None:
        error = (
            f"gave up: the turn was delivered {attempt} times and "
            "each worker died or hung before it ended"
        )
        await run.writer.append(
            [log.entry(log.TURN_FAILED, prompt=cur.prompt, turn=cur.turn, error=error)]
        )
        return
    step = run.next_step()
    if not isinstance(step, StartTurn):
        return
    turn = new_id()
    error = (
        f"gave up: the prompt was delivered {attempt} times and "
        "each worker died or hung before its turn started"
    )
    await run.writer.append(
        [
            log.entry(log.TURN_STARTED, prompt=step.prompt, turn=turn),
            log.entry(log.TURN_FAILED, prompt=step.prompt, turn=turn, error=error),
        ]
    )


async def fail_refused(run: RunState) -> None:
    """``turn.failed`` for a running turn that cannot run here (``run.refusal``)."""
    cur = run.state.current
    if cur is None or not run.refusal:
        return
    await run.writer.append(
        [log.entry(log.TURN_FAILED, prompt=cur.prompt, turn=cur.turn, error=run.refusal)]
    )
