"""Models: the small protocol the turn engine talks to, and its adapters."""

from fxworld.models.base import (
    Message,
    Model,
    ModelError,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)

__all__ = [
    "Message",
    "Model",
    "ModelError",
    "ModelEvent",
    "ModelRequest",
    "ModelResponse",
    "TextDelta",
    "ToolCall",
    "ToolSpec",
    "Usage",
]
