"""Large values in the inspector: a page shows their size and their first
:data:`HEAD_BYTES`, with a link to download the whole, and never holds more.

An entry's value (a tool's input or result, a prompt, a step's result) may be up
to the world's ``max_entry_bytes``, 64 MiB by default (docs/large-values.md). A
value longer than :data:`HEAD_BYTES` (as UTF-8, or as JSON when it is not a
string) is shown as a box: its size, its first part (scrubbed and escaped as any
text, cut where no part of a secret shows), and a link to
``values/{seq}?at=<pointer>``, the route that streams the whole value
(:func:`value_response`). Its size is counted, and its start cut, without making
another copy of it: a string's UTF-8 length is its length when it is ASCII, and
a JSON value is encoded piece by piece (``iterencode``), keeping only the start.

``at`` names the value inside the entry's data as a JSON pointer (RFC 6901):
``/output``, ``/tool_calls/0/input``; ``""`` is the whole data.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from html import escape
from typing import Any
from urllib.parse import quote

from starlette.responses import StreamingResponse

from fxworld.scrub import shown_start

from ._refusals import HTTPError

__all__ = [
    "HEAD_BYTES",
    "pointer",
    "resolve",
    "measure",
    "big_box",
    "size_text",
    "value_href",
    "value_response",
]

HEAD_BYTES = 4096
"""The bytes of a large value a page shows; past them, a link to the whole."""

_CHUNK = 1 << 20  # characters per piece a download sends


def pointer(*parts: str | int) -> str:
    """A JSON pointer to the value at ``parts`` (keys and list indices)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def resolve(data: Any, at: str) -> Any:
    """The value at pointer ``at`` in ``data``; :class:`HTTPError` 404 when there is none."""
    if at and not at.startswith("/"):
        raise HTTPError(400, "invalid_request", "at must be a JSON pointer, like /output")
    value = data
    for raw in at.split("/")[1:] if at else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise HTTPError(404, "not_found", f"the entry has no value at {at}")
    return value


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def measure(value: Any) -> tuple[int, str]:
    """``value``'s size in bytes (UTF-8; as JSON when it is not a str) and its text's
    first :data:`HEAD_BYTES` characters, read without copying the whole."""
    if isinstance(value, str):
        return _utf8_size(value), value[: HEAD_BYTES + 1]
    size, head = 0, []
    kept = 0
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


def big_box(value: Any, href: str) -> str | None:
    """The box a page shows for ``value`` when it is larger than :data:`HEAD_BYTES`
    (``href``: the link to the whole); ``None`` for a value small enough to show."""
    if isinstance(value, str) and len(value) <= HEAD_BYTES // 4:
        return None  # (at most 4 bytes a character: small, whatever it holds)
    size, head = measure(value)
    if size <= HEAD_BYTES:
        return None
    start = escape(shown_start(head, HEAD_BYTES), quote=True)
    words = size_text(size)
    return (
        f'<div class="big" data-size="{size}"><div class="meta">a large value:'
        f" <b>{words}</b> ({size:,} bytes); its first {size_text(HEAD_BYTES)}:</div>"
        f'<pre class="json">{start}…</pre><a class="download" href="{escape(href, quote=True)}"'
        f" download>download the whole value ({words})</a></div>"
    )


def value_href(session_id: str, seq: int, at: str) -> str:
    """The link, relative to a session's page, that downloads value ``at`` of entry ``seq``."""
    return f"./{quote(session_id, safe='')}/values/{seq}?at={quote(at, safe='/')}"


def _pieces(value: Any) -> Iterator[bytes]:
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


def value_response(value: Any, name: str) -> StreamingResponse:
    """The whole of ``value`` as a download: a str as UTF-8 text, anything else as
    JSON, sent in pieces of about 1 MiB (``name``: the file's name, without its
    extension)."""
    text = isinstance(value, str)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:120] or "value"
    headers = {
        "Content-Disposition": f'attachment; filename="{safe}.{"txt" if text else "json"}"',
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox",
    }
    media = "text/plain; charset=utf-8" if text else "application/json"
    return StreamingResponse(_pieces(value), media_type=media, headers=headers)
