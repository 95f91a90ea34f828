"""Models: the small protocol the turn engine talks to, and its adapters.

The adapters (``OpenAIModel``, ``AnthropicModel``), ``resolve_model`` and
``RetryPolicy`` load on first use, so importing this package imports no SDK.
"""

from typing import Any

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
    "OpenAIModel",
    "AnthropicModel",
    "RetryPolicy",
    "resolve_model",
]

_LAZY = {
    "OpenAIModel": "fxworld.models.openai",
    "AnthropicModel": "fxworld.models.anthropic",
    "RetryPolicy": "fxworld.models._retry",
    "resolve_model": "fxworld.models.resolve",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fxworld.models' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
