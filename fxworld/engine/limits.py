"""The bounds of a turn: how many model calls it makes, how deep agents as tools nest.

- **Model calls.** ``Agent(max_model_calls=50)`` bounds the model calls of one turn
  (``None``: no bound); ``session.prompt(..., max_model_calls=n)`` sets it for the
  turn of that prompt, saved in the prompt, so every worker that runs the turn
  honours it. The calls are counted from the log (the turn's ``message`` entries),
  so the bound holds across workers and crashes. A turn that has made that many
  and would call the model again ends with ``turn.failed`` (``reason``
  ``"max_model_calls"``, ``limit``): ``await turn`` raises
  :class:`~fxworld.engine.turn.TooManyModelCalls`.
- **Depth.** ``Agent(max_depth=5)``: a session at depth ``d`` (a root session 0, its
  child 1, ...: the length of the agent path its first entry saves) may make a
  child only while ``d + 1 <= max_depth`` of its agent; past it the call's result
  is a refusal the model reads, and no child session is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from fxworld.errors import InvalidArgument
from fxworld.types import NewEntry

from . import log
from .replay import TurnState

__all__ = [
    "DEFAULT_MAX_MODEL_CALLS",
    "DEFAULT_MAX_DEPTH",
    "MODEL_CALLS_REASON",
    "check_max_model_calls",
    "check_max_depth",
    "model_calls_spent",
    "depth_refusal",
]

DEFAULT_MAX_MODEL_CALLS: Final = 50
"""The model calls one turn may make unless the agent or the prompt says otherwise."""
DEFAULT_MAX_DEPTH: Final = 5
"""How deep agents as tools may nest unless the agent says otherwise."""
MODEL_CALLS_REASON: Final = "max_model_calls"
"""The ``reason`` of a ``turn.failed`` that the model-call limit wrote."""


def check_max_model_calls(value: object, *, none_ok: bool = True) -> int | None:
    """``value`` as a model-call limit: an int >= 1 (or ``None``: no bound, where
    ``none_ok``); :class:`~fxworld.errors.InvalidArgument` otherwise."""
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        allowed = "an int >= 1 or None" if none_ok else "an int >= 1"
        raise InvalidArgument(f"max_model_calls must be {allowed}, not {value!r}")
    return value


def check_max_depth(value: object) -> int:
    """``value`` as a depth limit: an int >= 0 (0: this agent makes no child)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"max_depth must be an int >= 0, not {value!r}")
    return value


def model_calls_spent(cur: TurnState, agent_limit: int | None) -> NewEntry | None:
    """The ``turn.failed`` that ends turn ``cur`` when it has made as many model
    calls as its limit (the prompt's, else the agent's), or ``None``: it may call."""
    limit = cur.max_model_calls if cur.max_model_calls is not None else agent_limit
    if limit is None or cur.model_calls < limit:
        return None
    error = (
        f"the turn made {cur.model_calls} model calls, its limit (max_model_calls={limit}); "
        "raise it on the agent or the prompt if the task needs more"
    )
    return log.entry(
        log.TURN_FAILED,
        prompt=cur.prompt,
        turn=cur.turn,
        error=error,
        reason=MODEL_CALLS_REASON,
        limit=limit,
    )


def depth_refusal(path: Sequence[str], name: str, max_depth: int) -> str | None:
    """Why a call of agent tool ``name``, in a session at the end of agent path
    ``path``, may not make a child session (``None``: it may)."""
    depth = len(path) + 1
    if depth <= max_depth:
        return None
    chain = " > ".join([*path, name])
    return (
        f"refused: calling the agent {name!r} here would nest agents {depth} deep "
        f"({chain}), past the limit max_depth={max_depth}; no agent was asked. "
        "Answer with what you have, or do the task without this tool"
    )
