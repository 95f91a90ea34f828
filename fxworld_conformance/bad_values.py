"""The kit's one table of bad session ids (W15), used by the directed checks and
by the example tests alike: every backend must refuse each with
``InvalidSessionId`` before any I/O."""

from __future__ import annotations

from typing import Any

__all__ = ["BAD_SESSION_IDS"]

BAD_SESSION_IDS: dict[str, Any] = {
    "empty": "",
    "129-chars": "x" * 129,
    "200-chars": "x" * 200,
    "slash": "a/b",
    "dot-dot": "../x",
    "dot": ".",
    "dot-dot-alone": "..",
    "space": "a b",
    "nul": "a\u0000b",
    "non-ascii": "café",
    "star": "a*",
    "semicolon": "a;drop",
    "newline": "a\nb",
    "trailing-newline": "s1\n",
    "braces": "{x}",
    "none": None,
    "int": 7,
    "bytes": b"ab",
}
"""Empty, too long, path-like (``.`` and ``..`` alone are path segments: an S3 key
``s/../g`` is another object on a server that normalises paths), spaces and control
characters, non-ASCII, quoting and query characters, a trailing newline, and values
that are not strings; each under the id its pytest test shows."""
