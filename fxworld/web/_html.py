"""The pieces every card of the inspector's timeline is made of: text escaped and
scrubbed (:func:`esc`), a value shown whole or, when large, as its size and start
with a link to download it (:func:`value_html`), links to sessions, times, a
card's head line."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import quote

from fxworld.scrub import shown

from ._values import big_box, value_href

__all__ = [
    "Shown",
    "esc",
    "session_link",
    "value_html",
    "text_html",
    "clock",
    "seconds",
    "entry_head",
    "as_int",
]


@dataclass(frozen=True)
class Shown:
    """An entry as ``visible`` lets the client see it (its kind and data may differ
    from the log's)."""

    seq: int
    kind: str
    data: dict[str, Any]
    at: datetime
    epoch: int | None


def esc(value: object) -> str:
    """``value`` as text for HTML: scrubbed, cut to ``SHOWN_CHARS`` with no part of
    a secret left at the cut (the log keeps it whole), escaped."""
    return escape(shown(str(value)), quote=True)


def session_link(session_id: object, css: str) -> str:
    """A link to another session's page (relative: the pages are ``…/sessions/{id}``)."""
    sid = str(session_id)
    return f'<a class="session-link {css}" href="./{escape(quote(sid, safe=""))}">{esc(sid)}</a>'


def value_html(value: Any, sid: str, seq: int, at: str) -> str:
    """Value ``at`` (a JSON pointer) of entry ``seq`` of session ``sid`` as a ``<pre>``
    of JSON (a str as it is), or, when large, its size, its start and a link to the
    whole (:mod:`~fxworld.web._values`)."""
    box = big_box(value, value_href(sid, seq, at))
    if box is not None:
        return box
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f'<pre class="json">{esc(text)}</pre>'


def text_html(value: Any, sid: str, seq: int, at: str, css: str = "text") -> str:
    """Text (a prompt, a model's reply) in a ``<div>``, or, when large, as
    :func:`value_html` shows it."""
    box = big_box(value, value_href(sid, seq, at))
    return box if box is not None else f'<div class="{css}">{esc(value)}</div>'


def clock(at: datetime | None) -> str:
    """A commit time as the pages show it (UTC)."""
    return "-" if at is None else at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def seconds(value: float) -> str:
    """A duration in plain words: ``0.42 s``, ``3 min 05 s``, ``2 h 01 min``."""
    if value < 60:
        return f"{value:.2f} s"
    whole = int(value)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def entry_head(seq: str, item: Shown, since: str, kind: str, note: str) -> str:
    """A card's head line: its seq(s), commit time, time since the entry before,
    kind(s), the worker's epoch and ``note`` (badges)."""
    epoch = "" if item.epoch is None else f"epoch {item.epoch}"
    return (
        f'<div class="head"><span class="seq">#{seq}</span>'
        f' <span class="at" title="UTC">{clock(item.at)}</span>'
        f' <span class="since">{since}</span> <span class="kind">{kind}</span>'
        f' <span class="worker">{epoch}</span>{note}</div>'
    )


def as_int(value: object) -> int:
    """``value`` if it is an int (not a bool), else 0: a log field as a number."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
