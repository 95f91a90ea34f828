"""PostgresWorld: the PostgreSQL backend of fxworld. Not built yet."""

from __future__ import annotations

from typing import NoReturn

from fxworld.errors import ConfigurationError

__all__ = ["PostgresWorld"]

_MESSAGE = "the PostgreSQL backend (PostgresWorld) is not built yet in this version of fxworld"


class PostgresWorld:
    """Placeholder: raises ConfigurationError when built."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise ConfigurationError(_MESSAGE)

    @classmethod
    def from_url(cls, url: str) -> NoReturn:
        raise ConfigurationError(_MESSAGE)
