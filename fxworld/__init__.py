"""fxworld: durable AI-agent sessions on the storage you choose.

Public surface only. The World contract lives in :mod:`fxworld.protocol`, its
value types in :mod:`fxworld.types`, its errors in :mod:`fxworld.errors`.
Importing fxworld imports no database driver and no model SDK.
"""

from typing import TYPE_CHECKING

from fxworld._select import open_world, world
from fxworld.engine import (
    Accepted,
    Agent,
    Approval,
    Session,
    StreamEvent,
    Tool,
    ToolContext,
    Turn,
    TurnFailed,
    TurnStopped,
    tool,
)
from fxworld.protocol import World
from fxworld.types import Entry, Fence, NewEntry, WakeLease

if TYPE_CHECKING:  # typed for users and mypy; loaded lazily at run time below
    from fxworld.embedded.memory import MemoryWorld
    from fxworld.embedded.sqlite import SqliteWorld

__all__ = [
    "World",
    "Entry",
    "Fence",
    "NewEntry",
    "WakeLease",
    "world",
    "open_world",
    "MemoryWorld",
    "SqliteWorld",
    "Agent",
    "Session",
    "StreamEvent",
    "Turn",
    "TurnFailed",
    "TurnStopped",
    "Approval",
    "Accepted",
    "Tool",
    "ToolContext",
    "tool",
]


def __getattr__(name: str) -> object:
    # The embedded worlds load on first use, so `import fxworld` stays light.
    if name == "MemoryWorld":
        from fxworld.embedded.memory import MemoryWorld

        return MemoryWorld
    if name == "SqliteWorld":
        from fxworld.embedded.sqlite import SqliteWorld

        return SqliteWorld
    raise AttributeError(f"module 'fxworld' has no attribute {name!r}")
