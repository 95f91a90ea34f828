"""The turn engine: agents, sessions, turns and the worker that runs them.

Durable by construction: a prompt is saved before it is acknowledged, and every
step of a turn is appended to the session's log (with the worker's fence) before
the next one begins, so any process can continue a turn from the log. The engine
reaches storage only through the :class:`~fxworld.protocol.World` protocol and
:func:`fxworld.world`.

The names below load their module on first use, so that a light part of the
engine (the log format, :mod:`fxworld.engine.log`; a session's summary,
:mod:`fxworld.engine.summary`) can be imported without the rest: the command
line builds its parser with them.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # typed for users and mypy; loaded lazily at run time below
    from .agent import Agent, WorkResult
    from .approvals import Approval
    from .cursor import decode_cursor, encode_cursor
    from .events import StreamEvent
    from .replay import conversation
    from .retention import PruneReport, prune
    from .session import Session
    from .steps import StepInterrupted
    from .subagents import child_session_id
    from .tools import Tool, ToolContext, ToolTimedOut, tool
    from .turn import Accepted, TooManyModelCalls, Turn, TurnFailed, TurnStopped

__all__ = [
    "Agent",
    "WorkResult",
    "Session",
    "StreamEvent",
    "Turn",
    "TurnFailed",
    "TurnStopped",
    "TooManyModelCalls",
    "Approval",
    "Accepted",
    "Tool",
    "ToolContext",
    "ToolTimedOut",
    "tool",
    "StepInterrupted",
    "child_session_id",
    "conversation",
    "prune",
    "PruneReport",
    "encode_cursor",
    "decode_cursor",
]

_LAZY = {
    "Agent": "agent",
    "WorkResult": "agent",
    "Approval": "approvals",
    "decode_cursor": "cursor",
    "encode_cursor": "cursor",
    "StreamEvent": "events",
    "conversation": "replay",
    "PruneReport": "retention",
    "prune": "retention",
    "Session": "session",
    "StepInterrupted": "steps",
    "child_session_id": "subagents",
    "Tool": "tools",
    "ToolContext": "tools",
    "ToolTimedOut": "tools",
    "tool": "tools",
    "Accepted": "turn",
    "Turn": "turn",
    "TurnFailed": "turn",
    "TurnStopped": "turn",
    "TooManyModelCalls": "turn",
}
"""Each public name -> the module (of this package) that holds it."""


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fxworld.engine' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
