"""Model strings: ``Agent(model="provider/model")`` to a :class:`Model`."""

from __future__ import annotations

from fxworld.errors import ConfigurationError
from fxworld.models.base import Model

__all__ = ["resolve_model"]


def resolve_model(name: str) -> Model:
    """The model a string names. Raises ``ConfigurationError`` when it cannot be
    built (unknown provider, missing extra, missing key), at agent build time."""
    raise ConfigurationError(f"model {name!r}: no provider adapters are built yet")
