"""The turn engine: agents, sessions, turns and the worker that runs them.

Durable by construction: a prompt is saved before it is acknowledged, and every
step of a turn is appended to the session's log (with the worker's fence) before
the next one begins, so any process can continue a turn from the log. The engine
reaches storage only through the :class:`~fxworld.protocol.World` protocol and
:func:`fxworld.world`.
"""

from .agent import Agent, WorkResult
from .approvals import Approval
from .cursor import decode_cursor, encode_cursor
from .events import StreamEvent
from .replay import conversation
from .retention import PruneReport, prune
from .session import Session
from .steps import StepInterrupted
from .tools import Tool, ToolContext, ToolTimedOut, tool
from .turn import Accepted, Turn, TurnFailed, TurnStopped

__all__ = [
    "Agent",
    "WorkResult",
    "Session",
    "StreamEvent",
    "Turn",
    "TurnFailed",
    "TurnStopped",
    "Approval",
    "Accepted",
    "Tool",
    "ToolContext",
    "ToolTimedOut",
    "tool",
    "StepInterrupted",
    "conversation",
    "prune",
    "PruneReport",
    "encode_cursor",
    "decode_cursor",
]
