"""The kit's one table of bad session ids (W15), used by the directed checks and
by the example tests alike: every backend must refuse each with
``InvalidSessionId`` before any I/O."""

from __future__ import annotations

from typing import Any

__all__ = ["BAD_SESSION_IDS"]

BAD_SESSION_IDS: list[Any] = [
    "",
    "x" * 129,
    "x" * 200,
    "a/b",
    "../x",
    "a b",
    "a\u0000b",
    "café",
    "a*",
    "a;drop",
    "a\nb",
    "s1\n",
    "{x}",
    None,
    7,
    b"ab",
]
"""Empty, too long, path-like, spaces and control characters, non-ASCII, quoting
and query characters, a trailing newline, and values that are not strings."""
