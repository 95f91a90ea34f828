"""RedisWorld: the Redis backend of fxworld. Not built yet.

Until its issue lands, using it raises ConfigurationError, so that a URL such as
`redis://...` fails with a clear message rather than an ImportError.
"""

from __future__ import annotations

from typing import NoReturn

from fxworld.errors import ConfigurationError

__all__ = ["RedisWorld"]

_MESSAGE = (
    "the Redis backend (RedisWorld) is not built yet in this version of fxworld; "
    "use sqlite:///path, memory:// or postgresql://... for now"
)


class RedisWorld:
    """Placeholder: raises ConfigurationError when built."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise ConfigurationError(_MESSAGE)

    @classmethod
    def from_url(cls, url: str) -> NoReturn:
        raise ConfigurationError(_MESSAGE)
