"""Entry data as JSON text, fast for large values (docs/large-values.md, "Cost").

The standard library's encoder escapes a string one character at a time: about
45 ms for 10 MiB of text, more than a store needs to save it. A string of at least
:data:`LARGE_STRING` characters is encoded by pydantic-core (a dependency of
pydantic, so of fxworld) instead, three times faster, and spliced into the JSON of
the rest, which the standard encoder writes as before: small data is encoded
exactly as it always was. Reading, data of at least :data:`LARGE_STRING` characters
is parsed by pydantic-core too (four times faster than ``json.loads``), falling back
to ``json.loads`` for what it refuses (an escaped lone surrogate, which fxworld
never writes).

Both give the JSON text and the values the standard library gives: the same object
back, the same size counted against ``max_entry_bytes``.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

__all__ = ["LARGE_STRING", "encode_large", "encode_bytes", "decode"]

LARGE_STRING = 64 * 1024
"""A string value this long (characters) is encoded on its own; a text this long
is parsed by pydantic-core."""


def encode_large(data: dict[str, Any], encoder: json.JSONEncoder) -> tuple[str, int]:
    """The JSON text of ``data`` and its size in UTF-8 bytes, for data that holds at
    least one string value of :data:`LARGE_STRING` or more characters (found by the
    caller's walk, which also checked that ``data`` nests within bounds).

    Raises what ``encoder`` raises, and ``UnicodeEncodeError`` for a large string
    that is not valid Unicode (a lone surrogate), as the caller's size check does.
    """
    body = encode_bytes(data, encoder)
    return body.decode("utf-8"), len(body)


def encode_bytes(value: Any, encoder: json.JSONEncoder) -> bytes:
    """The JSON of ``value`` as ``encoder`` writes it, in UTF-8, its string values of
    :data:`LARGE_STRING` or more characters encoded apart (fast; not escaped to
    ASCII even when ``encoder`` escapes the rest). Containers are dicts and lists."""
    token = secrets.token_hex(12)
    pieces: list[bytes] = []
    skeleton = encoder.encode(_swap(value, token, pieces)).encode("utf-8")
    spots = []
    for i in range(len(pieces)):
        mark = f'"{token}{i}"'.encode()
        at = skeleton.find(mark)
        if at < 0 or skeleton.find(mark, at + 1) >= 0:  # a caller's string holds the token
            pieces.clear()
            return encoder.encode(value).encode("utf-8")
        spots.append((at, len(mark), i))
    spots.sort()
    parts: list[bytes] = []
    start = 0
    for at, width, i in spots:
        parts += (skeleton[start:at], pieces[i])
        start = at + width
    parts.append(skeleton[start:])
    pieces.clear()
    return b"".join(parts)


def _swap(value: Any, token: str, pieces: list[bytes]) -> Any:
    """``value`` with each large string replaced by a placeholder ``<token><i>``, its
    JSON (UTF-8) appended to ``pieces``; containers on the way copied, the others
    shared. (A function of the module, not a closure: a recursive closure is a
    reference cycle, garbage for the collector on every call.)"""
    if type(value) is str and len(value) >= LARGE_STRING:
        from pydantic_core import PydanticSerializationError, to_json

        try:
            pieces.append(to_json(value))
        except PydanticSerializationError:
            value.encode("utf-8")  # raises the UnicodeEncodeError it met
            raise
        return f"{token}{len(pieces) - 1}"
    if isinstance(value, dict):
        out = {k: _swap(v, token, pieces) for k, v in value.items()}
        return out if any(out[k] is not v for k, v in value.items()) else value
    if isinstance(value, list):
        items = [_swap(v, token, pieces) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


def decode(text: str | bytes) -> Any:
    """The value of JSON ``text`` (an entry's data as a world stored it)."""
    if len(text) >= LARGE_STRING:
        from pydantic_core import from_json

        try:
            return from_json(text)
        except ValueError:
            pass  # what json.loads takes and pydantic-core does not: its answer
    return json.loads(text)
