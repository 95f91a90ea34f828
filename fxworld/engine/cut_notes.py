"""What the model hears about a call cut short: what still runs, and which of its
durable steps finished.

- :func:`running_note`: the parts of a call that its cut (a timeout, a stop) left
  running in a thread (:mod:`fxworld.engine.threads`): they were NOT stopped and
  may still complete, so the model checks before it calls the tool again.
- :func:`steps_note`: the call's durable steps that finished (their effects
  happened, once; calling the tool again would repeat them) and those started that
  did not finish (they may have partly run).
- :func:`cancelled_message`: a call a stop cancelled, with both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["running_note", "steps_note", "finished_note", "cancelled_message", "quoted"]


def quoted(names: Iterable[str]) -> str:
    """``'a'``, ``'a' and 'b'``, ``'a', 'b' and 'c'``."""
    q = [repr(n) for n in names]
    return q[0] if len(q) == 1 else f"{', '.join(q[:-1])} and {q[-1]}"


def running_note(parts: Sequence[str]) -> str:
    """What of a call still runs in a thread, as a clause (``""``: nothing); the
    parts as :attr:`~fxworld.engine.threads.CallThreads.left_running` names them."""
    if not parts:
        return ""
    steps = [p.partition(":")[2] for p in parts if p.startswith("step:")]
    if len(steps) < len(parts):  # the tool's own function
        who, again = "it", "calling it again"
    else:
        who = f"its step{'s' if len(steps) > 1 else ''} {quoted(steps)}"
        again = "calling the tool again"
    return (
        f"{who} {'were' if len(steps) > 1 else 'was'} NOT stopped: a sync function runs in "
        "a thread, which cannot be stopped, so it may still complete and its effects may "
        f"still happen. Check whether they did before {again}"
    )


def finished_note(finished: Sequence[str]) -> str:
    """The call's durable steps that finished, as a sentence (``""``: none)."""
    if not finished:
        return ""
    many = len(finished) > 1
    return (
        f"Its step{'s' if many else ''} {quoted(finished)} finished: "
        f"{'their effects' if many else 'its effect'} happened, once, and calling the tool "
        f"again would repeat {'them' if many else 'it'}."
    )


def steps_note(finished: Sequence[str], cut: Sequence[str]) -> str:
    """The call's durable steps that finished, and those started that did not
    finish (``""``: no step started)."""
    parts = [finished_note(finished)]
    if cut:
        many = len(cut) > 1
        parts.append(
            f"Its step{'s' if many else ''} {quoted(cut)} {'were' if many else 'was'} started "
            f"and did not finish: {'they' if many else 'it'} may have partly run."
        )
    return " ".join(p for p in parts if p)


def cancelled_message(
    name: str, running: Sequence[str], finished: Sequence[str], cut: Sequence[str]
) -> str:
    """What the model hears about a call the user's stop cancelled while it ran:
    ``running`` (:func:`running_note`), and its steps (:func:`steps_note`; the cut
    steps that still run are named once, as running)."""
    text = f"The call to tool {name!r} was cancelled: the user stopped the turn."
    note = running_note(running)
    if note:
        text = f"{text[:-1]}, but {note}."
    else:
        text += " It no longer runs, but it may have partly run."
    still = {p.partition(":")[2] for p in running if p.startswith("step:")}
    steps = steps_note(finished, [s for s in cut if s not in still])
    return f"{text} {steps}" if steps else text
