"""The Model protocol: what the turn engine asks of a language model.

The engine builds a :class:`ModelRequest` from the session's log (instructions,
the conversation as :class:`Message` values, the tools as :class:`ToolSpec`) and
iterates ``model.stream(request)``: zero or more :class:`TextDelta` as text
arrives, then exactly one :class:`ModelResponse` with the whole reply. A reply may
carry several tool calls (parallel calls). Adapters translate provider errors:
retryable ones are retried inside the adapter; what is left is raised as
:class:`ModelError` (a :class:`~fxworld.errors.WorldError`, see there why) with
``retryable`` set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from fxworld.errors import ModelError  # defined with fxworld's other errors; kept here too

__all__ = [
    "ToolSpec",
    "ToolCall",
    "Message",
    "ModelRequest",
    "TextDelta",
    "Usage",
    "ModelResponse",
    "ModelEvent",
    "Model",
    "ModelError",
]


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it: name, description, JSON Schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model asked for. ``id`` is the provider's call id (or one
    the engine made); the engine maps it to a stable ``execution_id``."""

    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Message:
    """One message of the conversation.

    - ``user``: a prompt, ``text``.
    - ``assistant``: the model's ``text`` and its ``tool_calls``.
    - ``tool``: the result of the call ``tool_call_id``: ``text`` (JSON or plain),
      ``is_error`` when the tool raised or may have partly run.
    """

    role: Literal["user", "assistant", "tool"]
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False


@dataclass(frozen=True)
class ModelRequest:
    """Everything a model needs for one call."""

    instructions: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()


@dataclass(frozen=True)
class TextDelta:
    """A piece of the reply's text, as it streams."""

    text: str


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class ModelResponse:
    """The whole reply: its text (the concatenated deltas), its tool calls, usage
    and the provider's stop reason."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    stop_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


ModelEvent: TypeAlias = TextDelta | ModelResponse


@runtime_checkable
class Model(Protocol):
    """A language model the engine can call."""

    name: str
    """A short identifier saved with each model message, e.g. ``anthropic/claude-x``."""

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield :class:`TextDelta` values as text arrives, then one
        :class:`ModelResponse`. Raise :class:`ModelError` on failure."""
        ...
