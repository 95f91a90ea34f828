"""The engine's log format: the entry kinds a session's log holds, version 1.

Every entry the engine writes carries ``"v": 1`` in its data. Readers accept any
entry whose ``v`` is at most :data:`LOG_VERSION`, ignore data fields they do not
know, and skip kinds they do not know, so older logs stay readable and newer
fields can be added without breaking old readers. ``docs/log-format.md`` is the
description stream consumers depend on; this module is its single source in code.
"""

from __future__ import annotations

from typing import Any, Final

from fxworld.types import JSONObject, NewEntry

__all__ = [
    "LOG_VERSION",
    "PROMPT",
    "TURN_STARTED",
    "TEXT",
    "TEXT_DISCARDED",
    "MESSAGE",
    "TOOL_STARTED",
    "TOOL_FINISHED",
    "TOOL_INTERRUPTED",
    "TURN_FINISHED",
    "TURN_FAILED",
    "TURN_YIELDED",
    "FENCE",
    "TURN_END_KINDS",
    "entry",
]

LOG_VERSION: Final = 1

PROMPT: Final = "prompt"
"""A user prompt, appended unfenced by ``Session.prompt``:
``{"text", "key"}``."""
TURN_STARTED: Final = "turn.started"
"""A worker began answering the prompt at seq ``prompt``: ``{"prompt", "turn"}``."""
TEXT: Final = "text"
"""A chunk of model text as it streamed: ``{"call", "text"}``."""
TEXT_DISCARDED: Final = "text.discarded"
"""The model call ``call`` was cut (crash, handover, retried error); its ``text``
chunks are not part of the conversation and the call is made again:
``{"call", "reason"}``."""
MESSAGE: Final = "message"
"""The model's whole reply: ``{"call", "model", "text", "tool_calls": [{"id",
"name", "input", "execution_id"}], "usage": {"input_tokens", "output_tokens"} |
null, "stop_reason"}``."""
TOOL_STARTED: Final = "tool.started"
"""Written *before* a tool runs: ``{"execution_id", "call_id", "name", "input",
"attempt"}`` (attempt 2, 3, ... when an idempotent call runs again)."""
TOOL_FINISHED: Final = "tool.finished"
"""A tool returned or raised: ``{"execution_id", "call_id", "name", "output",
"is_error"}``."""
TOOL_INTERRUPTED: Final = "tool.interrupted"
"""A non-idempotent call was found started but not finished; it is not run again
and the model is told: ``{"execution_id", "call_id", "name", "message"}``."""
TURN_FINISHED: Final = "turn.finished"
"""The turn answering prompt ``prompt`` ended with ``text``: ``{"prompt", "turn", "text"}``."""
TURN_FAILED: Final = "turn.failed"
"""The turn answering prompt ``prompt`` failed: ``{"prompt", "turn", "error"}``."""
TURN_YIELDED: Final = "turn.yielded"
"""The worker stopped at a step boundary and asked for a wake, so another
invocation continues: ``{"prompt", "turn", "reason": "deadline" | "handover"}``."""
FENCE: Final = "fence"
"""Written by the world itself on every takeover (``acquire``): ``{"epoch"}``."""

TURN_END_KINDS: Final = frozenset({TURN_FINISHED, TURN_FAILED})
"""The kinds that end a turn (``turn.yielded`` does not: the turn goes on)."""


def entry(kind: str, **data: Any) -> NewEntry:
    """A new entry of ``kind`` with ``data`` and the log version."""
    body: JSONObject = {"v": LOG_VERSION, **data}
    return NewEntry(kind, body)
