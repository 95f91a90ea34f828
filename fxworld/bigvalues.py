"""Large values as a person is shown them, by the inspector and ``fxworld sessions
show``: their size and their first :data:`HEAD_BYTES`, never the whole.

An entry's value (a tool's input or result, a prompt, a step's result) may be up
to the world's ``max_entry_bytes``, 64 MiB by default (docs/large-values.md). A
value larger than :data:`HEAD_BYTES` (as UTF-8; as JSON when it is not a string)
is shown by its size and start, with the way to get the whole: the inspector's
download link, ``fxworld sessions value ID SEQ POINTER``. Its size is counted,
and its start cut, without another copy of it: a string's UTF-8 length is its
length when it is ASCII, and a JSON value is encoded piece by piece
(``iterencode``), keeping only the start.

A value inside an entry's data is named by a JSON pointer (RFC 6901):
``/output``, ``/tool_calls/0/input``; ``""`` is the whole data.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "HEAD_BYTES",
    "pointer",
    "resolve",
    "measure",
    "size_text",
    "is_large",
    "large_values",
    "pieces",
]

HEAD_BYTES = 4096
"""The bytes of a large value a person is shown; past them, the way to the whole."""

_CHUNK = 1 << 20  # characters per piece of a whole value sent or written


def pointer(*parts: str | int) -> str:
    """A JSON pointer to the value at ``parts`` (keys and list indices)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def resolve(data: Any, at: str) -> Any:
    """The value at pointer ``at`` in ``data``; :class:`LookupError` when there is
    none, :class:`ValueError` for a pointer that does not start with ``/``."""
    if at and not at.startswith("/"):
        raise ValueError(f"{at!r} is not a JSON pointer (like /output)")
    value = data
    for raw in at.split("/")[1:] if at else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise LookupError(f"no value at {at}")
    return value


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def measure(value: Any) -> tuple[int, str]:
    """``value``'s size in bytes (UTF-8; as JSON when it is not a str) and its text's
    first :data:`HEAD_BYTES` characters and one, read without copying the whole."""
    if isinstance(value, str):
        return _utf8_size(value), value[: HEAD_BYTES + 1]
    size, head, kept = 0, [], 0
    for piece in json.JSONEncoder(ensure_ascii=False).iterencode(value):
        size += _utf8_size(piece)
        if kept <= HEAD_BYTES:
            head.append(piece[: HEAD_BYTES + 1 - kept])
            kept += len(head[-1])
    return size, "".join(head)


def size_text(size: int) -> str:
    """A size in plain words: ``812 bytes``, ``4.0 KiB``, ``3.0 MiB``."""
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


def is_large(value: Any) -> bool:
    """Whether ``value`` is over :data:`HEAD_BYTES` (a short str is known small at once)."""
    if isinstance(value, str) and len(value) <= HEAD_BYTES // 4:
        return False  # (at most 4 bytes a character)
    if value is None or isinstance(value, bool | int | float):
        return False
    return measure(value)[0] > HEAD_BYTES


def large_values(data: Any, at: str = "") -> Iterator[tuple[str, Any]]:
    """The largest parts of ``data`` over :data:`HEAD_BYTES`, by pointer: a large
    string, or a large object or list none of whose own parts is large."""
    if not is_large(data):
        return
    parts: list[tuple[str, Any]] = []
    if isinstance(data, Mapping):
        parts = [(f"{at}{pointer(k)}", v) for k, v in data.items()]
    elif isinstance(data, list):
        parts = [(f"{at}{pointer(i)}", v) for i, v in enumerate(data)]
    found = False
    for where, value in parts:
        for hit in large_values(value, where):
            found = True
            yield hit
    if not found:
        yield at, data


def pieces(value: Any) -> Iterator[bytes]:
    """The whole of ``value`` as UTF-8 (a str as it is, anything else as JSON), in
    pieces of about 1 MiB."""
    if isinstance(value, str):
        for i in range(0, len(value), _CHUNK):
            yield value[i : i + _CHUNK].encode("utf-8", "surrogatepass")
        return
    buffer: list[str] = []
    held = 0
    for piece in json.JSONEncoder(ensure_ascii=False).iterencode(value):
        buffer.append(piece)
        held += len(piece)
        if held >= _CHUNK:
            yield "".join(buffer).encode("utf-8", "surrogatepass")
            buffer, held = [], 0
    if buffer:
        yield "".join(buffer).encode("utf-8", "surrogatepass")
