"""S3World: the S3 backend of fxworld. Not built yet.

Until its issue lands, using it raises ConfigurationError, so that a URL such as
`s3://...` fails with a clear message rather than an ImportError.
"""

from __future__ import annotations

from typing import NoReturn

from fxworld.errors import ConfigurationError

__all__ = ["S3World"]

_MESSAGE = (
    "the S3 backend (S3World) is not built yet in this version of fxworld; "
    "use sqlite:///path, memory:// or postgresql://... for now"
)


class S3World:
    """Placeholder: raises ConfigurationError when built."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise ConfigurationError(_MESSAGE)

    @classmethod
    def from_url(cls, url: str) -> NoReturn:
        raise ConfigurationError(_MESSAGE)
