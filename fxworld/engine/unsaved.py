"""What a run says when the world refuses to save a value (W15): too large for
one entry (:class:`~fxworld.errors.EntryTooLarge`), or not JSON the log keeps
(:class:`~fxworld.errors.InvalidEntry`: a tuple, a key that is not a string, NaN,
a lone surrogate).

A world refuses such an append before writing anything, so the run saves what
happened instead, never a stalled turn:

- a tool's result: the call's ``tool.finished`` is an error the model hears
  (:func:`refused_result`), and the turn goes on; the tool is not run again;
- a durable step's result: ``step.finished`` with ``error`` and no ``result`` (the
  effect ran: a resume does not run it again), and the tool gets
  :class:`~fxworld.errors.InvalidArgument` (:func:`step_refused`);
- the model's reply or answer: its text is discarded and the turn fails, naming
  it (:func:`reply_refused`);
- anything else a turn writes: the turn fails (:func:`turn_refused`).

The messages name the size and the world's limit, whatever the limit is: they
come from the refusal itself.
"""

from __future__ import annotations

from fxworld.errors import EntryTooLarge, InvalidEntry
from fxworld.scrub import scrub
from fxworld.types import NewEntry

from . import log

__all__ = ["why_refused", "refused_result", "step_refused", "reply_refused", "turn_refused"]


def why_refused(e: InvalidEntry) -> str:
    """The refusal in words: its size and the limit, or what is not JSON."""
    if isinstance(e, EntryTooLarge):
        return (
            f"it is too large to save: {e.size} bytes, over the world's limit of "
            f"{e.limit} bytes per entry"
        )
    return f"it cannot be saved: {scrub(str(e))}"


def refused_result(finished: NewEntry, e: InvalidEntry) -> NewEntry:
    """The ``tool.finished`` to save instead of ``finished``, which the world
    refused: the same call, its output an error the model hears."""
    d = finished.data
    name = d.get("name")
    what = "error" if d.get("is_error") is True else "result"
    output = (
        f"the {what} of tool {name!r} was not kept: {why_refused(e)}. The tool ran and "
        "is not run again; ask for less of it (a part, a page, a summary)."
    )
    return log.entry(
        log.TOOL_FINISHED,
        execution_id=d.get("execution_id"),
        call_id=d.get("call_id"),
        name=name,
        output=output,
        is_error=True,
    )


def step_refused(name: str, result_type: str, e: InvalidEntry) -> str:
    """Why step ``name``'s result (of type ``result_type``) was not saved."""
    return (
        f"step {name!r} ran, and its result ({result_type}) was not saved: "
        f"{why_refused(e)}; the step is not run again"
    )


def reply_refused(e: InvalidEntry, *, answer: bool) -> str:
    """Why the turn failed: the model's reply (``answer``: its answer, a reply
    without tool calls) could not be saved."""
    what = "answer" if answer else "reply"
    return f"the model's {what} was not saved: {why_refused(e)}"


def turn_refused(e: InvalidEntry) -> str:
    """Why the turn failed: an entry it had to save was refused."""
    return f"the turn could not go on: an entry of it was not saved: {why_refused(e)}"
