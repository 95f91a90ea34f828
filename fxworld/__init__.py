"""fxworld: durable AI-agent sessions on the storage you choose.

Public surface only. The World contract lives in :mod:`fxworld.protocol`, its
value types in :mod:`fxworld.types`, its errors in :mod:`fxworld.errors`.
Importing fxworld imports no database driver and no model SDK, and loads the
engine and the embedded worlds only when one of their names is first used.
"""

import importlib
from typing import TYPE_CHECKING

from fxworld.protocol import World
from fxworld.selection import (
    open_world,
    register_scheme,
    registered_schemes,
    unregister_scheme,
    world,
)
from fxworld.types import Entry, Fence, NewEntry, WakeLease
from fxworld.wakes import take_wakes

if TYPE_CHECKING:  # typed for users and mypy; loaded lazily at run time below
    from fxworld.embedded.memory import MemoryWorld
    from fxworld.embedded.sqlite import SqliteWorld
    from fxworld.encryption import EncryptedWorld
    from fxworld.engine import (
        Accepted,
        Agent,
        Approval,
        PruneReport,
        Session,
        StreamEvent,
        Tool,
        ToolContext,
        TooManyModelCalls,
        Turn,
        TurnFailed,
        TurnStopped,
        prune,
        tool,
    )

__all__ = [
    "World",
    "Entry",
    "Fence",
    "NewEntry",
    "WakeLease",
    "world",
    "open_world",
    "register_scheme",
    "unregister_scheme",
    "registered_schemes",
    "take_wakes",
    "MemoryWorld",
    "SqliteWorld",
    "EncryptedWorld",
    "Agent",
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
    "tool",
    "prune",
    "PruneReport",
]


_ENGINE = ("Accepted", "Agent", "Approval", "Session", "StreamEvent", "Tool", "ToolContext")
_LAZY = {
    "MemoryWorld": "fxworld.embedded.memory",
    "SqliteWorld": "fxworld.embedded.sqlite",
    "EncryptedWorld": "fxworld.encryption",
    **dict.fromkeys(
        (*_ENGINE, "Turn", "TurnFailed", "TurnStopped", "TooManyModelCalls", "tool", "prune"),
        "fxworld.engine",
    ),
    "PruneReport": "fxworld.engine",
}
"""Names loaded on first use, so that a backend (or ``fxworld.validate``) can be
imported without loading the engine or the embedded worlds."""


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fxworld' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
