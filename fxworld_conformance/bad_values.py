"""The kit's tables of bad input (W15): every backend must refuse each value with
a typed error before any I/O, and write nothing."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fxworld.types import NewEntry

__all__ = [
    "BAD_SESSION_IDS",
    "GOOD_SESSION_IDS",
    "RESERVED_KINDS",
    "BAD_KINDS",
    "NON_OBJECT_DATA",
    "NON_JSON_DATA",
    "BAD_ENTRY_LISTS",
    "BAD_EXPECTS",
    "BAD_LIMITS",
    "BAD_AFTERS",
    "BAD_DELAYS",
    "BAD_LEASES",
    "BAD_KEYS",
    "nested",
]

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

GOOD_SESSION_IDS: list[str] = ["a", "x" * 128, "A-Z.a_z:0-9"]
"""The edges of what a session id may be: each is accepted."""

RESERVED_KINDS = ["fence", "fence.x", "fence-x", "fencepost", "fenced", "fence2"]
BAD_KINDS: dict[str, Any] = {"empty": "", "65-chars": "k" * 65, "int": 5, "none": None}
NON_OBJECT_DATA: list[Any] = [[], [1, 2], "text", None, 5, 1.5, True]


def nested(depth: int) -> dict[str, Any]:
    """``{"a": {"a": ...}}``, ``depth`` levels deep."""
    out: dict[str, Any] = {}
    for _ in range(depth):
        out = {"a": out}
    return out


NON_JSON_DATA: dict[str, Any] = {
    "object": {"a": object()},
    "set": {"a": {1, 2}},
    "bytes": {"a": b"bytes"},
    "nan": {"a": float("nan")},
    "inf": {"a": float("inf")},
    "nested-minus-inf": {"a": {"deep": float("-inf")}},
    "tuple": {"a": (1, 2)},
    "int-key": {1: "int key"},
    "tuple-key": {(1, 2): "tuple key"},
    "datetime": {"a": datetime(2020, 1, 1)},
    "nested-5000-deep": nested(5000),
}
BAD_ENTRY_LISTS: list[Any] = [[], "abc", NewEntry("k", {}), [("k", {})], [{"kind": "k"}]]
# 2**64 and 1e300 fit no backend's integer or timestamp: refused, never a driver error
BAD_EXPECTS: list[Any] = [-1, 1.5, "3", True, 2**64]
BAD_LIMITS: list[Any] = [0, -1, 1.5, "10", True, 2**64]
BAD_AFTERS: list[Any] = [-1, 1.5, "1", 2**64]
BAD_DELAYS: list[Any] = [-1, -0.001, float("nan"), float("inf"), "1", True, 1e300]
BAD_LEASES: list[Any] = [0, -1, float("nan"), float("inf"), "1", False, 1e300]
BAD_KEYS: dict[str, Any] = {"empty": "", "257-chars": "k" * 257, "int": 5}
