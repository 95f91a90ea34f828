"""Large values in the inspector: a page shows their size and their first
:data:`~fxworld.bigvalues.HEAD_BYTES`, with a link to download the whole, and
never holds more (:mod:`fxworld.bigvalues` measures them).

A value larger than that is shown as a box: its size, its first part (scrubbed
and escaped as any text, cut where no part of a secret shows) and a link to
``values/{seq}?at=<pointer>``, the route that streams the whole value
(:func:`value_response`): as ``visible`` lets the viewer see the entry, after
``authorize(..., "view")``, and not scrubbed (it is the data, whole).
"""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import quote

from starlette.responses import StreamingResponse

from fxworld import bigvalues
from fxworld.bigvalues import HEAD_BYTES, is_large, measure, size_text
from fxworld.scrub import shown_start

from ._refusals import HTTPError

__all__ = ["pointer", "resolve", "big_box", "value_href", "value_response"]

pointer = bigvalues.pointer


def resolve(data: Any, at: str) -> Any:
    """The value at pointer ``at`` in ``data``; :class:`HTTPError` 400 or 404."""
    try:
        return bigvalues.resolve(data, at)
    except ValueError as e:
        raise HTTPError(400, "invalid_request", str(e)) from None
    except LookupError:
        raise HTTPError(404, "not_found", f"the entry has no value at {at}") from None


def big_box(value: Any, href: str) -> str | None:
    """The box a page shows for ``value`` when it is larger than ``HEAD_BYTES``
    (``href``: the link to the whole); ``None`` for a value small enough to show."""
    if not is_large(value):
        return None
    size, head = measure(value)
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
    return StreamingResponse(bigvalues.pieces(value), media_type=media, headers=headers)
