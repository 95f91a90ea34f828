"""The inspector's timeline: each log entry as one HTML row, escaped and scrubbed.

Every piece of text an entry shows (a prompt, model text, a tool's input and
output, an error, a reason) passes through the one scrubber
(:func:`fxworld.scrub.shown`, as the CLI shows waiting calls), then through
``html.escape``: a key or a card number in a tool's input is masked, and no entry
can inject markup. The rows of a page and the rows streamed live are made by the
same :class:`Timeline`, so both read alike.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Any

from fxworld.engine import log
from fxworld.scrub import shown

__all__ = ["Row", "Shown", "Timeline", "clock", "esc"]


def esc(value: object) -> str:
    """``value`` as text for HTML: scrubbed, cut to ``SHOWN_CHARS`` with no part of
    a secret left at the cut (the log keeps it whole), escaped."""
    return escape(shown(str(value)), quote=True)


def _json(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f'<pre class="json">{esc(text)}</pre>'


def clock(at: datetime | None) -> str:
    """A commit time as the pages show it (UTC)."""
    return "-" if at is None else at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


@dataclass(frozen=True)
class Shown:
    """An entry as ``visible`` lets the client see it (its kind and data may differ
    from the log's)."""

    seq: int
    kind: str
    data: dict[str, Any]
    at: datetime
    epoch: int | None


@dataclass(frozen=True)
class Row:
    """One entry as shown: ``html`` is the whole ``<li>``; ``call`` and ``text``
    are set for a streamed text chunk (the page joins the chunks of one call)."""

    seq: int
    kind: str
    html: str
    call: str | None = None
    text: str | None = None
    execution_id: str | None = None


class Timeline:
    """Renders entries in log order; remembers the previous entry's time (each row
    shows the time since it) and the last step boundary (a model message shows the
    time its call took)."""

    def __init__(self, session_id: str, *, waiting: Collection[str] = ()) -> None:
        self.session_id = session_id
        self.waiting = waiting
        self._previous: datetime | None = None
        self._boundary: datetime | None = None
        self._in_turn = False
        self._parked = False

    def rows(self, items: Sequence[Shown]) -> list[Row]:
        """The rows of ``items`` (in log order), the text chunks of one model call
        that follow each other joined into one row."""
        joined: list[Shown] = []
        for item in items:
            prev = joined[-1] if joined else None
            if prev is not None and item.kind == prev.kind == log.TEXT:
                if prev.data.get("call") == item.data.get("call"):
                    text = str(prev.data.get("text", "")) + str(item.data.get("text", ""))
                    joined[-1] = Shown(
                        prev.seq, prev.kind, {**prev.data, "text": text}, item.at, prev.epoch
                    )
                    continue
            joined.append(item)
        return [self.row(x) for x in joined]

    def row(self, item: Shown) -> Row:
        seq, kind, data, at, epoch = item.seq, item.kind, item.data, item.at, item.epoch
        since = "" if self._previous is None else f"+{(at - self._previous).total_seconds():.2f} s"
        took = None if self._boundary is None else (at - self._boundary).total_seconds()
        self._previous = at
        if kind != log.TEXT:
            self._boundary = at
        body, note = self._body(kind, data, took)
        if kind == log.TURN_STARTED or kind in log.TURN_END_KINDS:
            self._in_turn = kind == log.TURN_STARTED
        if kind in (log.APPROVAL_REQUESTED, log.TURN_YIELDED, log.FENCE):
            self._parked = kind != log.FENCE  # the turn waits, held by no worker
        eid = data.get("execution_id")
        head = (
            f'<span class="seq">#{seq}</span> <span class="at" title="UTC">{clock(at)}</span>'
            f' <span class="since">{since}</span> <span class="kind">{esc(kind)}</span>'
            f' <span class="worker">{"" if epoch is None else f"epoch {epoch}"}</span>'
            f"{note}"
        )
        call = str(data.get("call")) if kind == log.TEXT else None
        attrs = f' data-call="{esc(call)}"' if call is not None else ""
        attrs += f' data-eid="{esc(eid)}"' if isinstance(eid, str) else ""
        html = (
            f'<li class="entry k-{esc(kind.replace(".", "-"))}" id="e{seq}" data-seq="{seq}"'
            f'{attrs}><div class="head">{head}</div><div class="body">{body}</div></li>'
        )
        text = shown(str(data.get("text", ""))) if kind == log.TEXT else None
        return Row(seq, kind, html, call, text, eid if isinstance(eid, str) else None)

    def _body(self, kind: str, d: dict[str, Any], took: float | None) -> tuple[str, str]:
        """The row's body and a note for its head (a badge)."""
        if kind == log.PROMPT:  # the first one may hold the session's context
            context = f"context{_json(d['context'])}" if "context" in d else ""
            return f'<div class="text">{esc(d.get("text", ""))}</div>{context}', ""
        if kind == log.TEXT:
            return f'<span class="text">{esc(d.get("text", ""))}</span>', ""
        if kind == log.FENCE:
            epoch = esc(d.get("epoch"))
            if self._in_turn and not self._parked:  # its worker crashed, or lost its lease
                note = ' <span class="badge warn">takeover</span>'
                return f"another worker (epoch {epoch}) took the running turn over", note
            if self._in_turn:
                return f"a worker (epoch {epoch}) took the waiting turn up again", ""
            return f"a worker (epoch {epoch}) took the session", ""
        if kind == log.MESSAGE:
            return _message(d, took), ""
        if kind == log.TOOL_STARTED:
            return _tool_started(d)
        if kind == log.TOOL_FINISHED:
            bad = d.get("is_error") is True
            note = ' <span class="badge bad">error</span>' if bad else ""
            return f"<b>{esc(d.get('name'))}</b> returned{_json(d.get('output'))}", note
        if kind == log.APPROVAL_REQUESTED:
            return self._approval(d), ' <span class="badge wait">approval</span>'
        return _other(kind, d)

    def _approval(self, d: dict[str, Any]) -> str:
        eid = str(d.get("execution_id"))
        expires = d.get("expires_at") or "never"
        body = (
            f"<b>{esc(d.get('name'))}</b> waits for a decision (expires: {esc(expires)})"
            f'{_json(d.get("input"))}<div class="eid">execution {esc(eid)}</div>'
        )
        if eid in self.waiting:
            body += (
                f'<div class="decide" data-eid="{esc(eid)}">'
                '<button class="approve">Approve</button> <button class="deny">Deny</button>'
                "</div>"
            )
        return body


def _message(d: dict[str, Any], took: float | None) -> str:
    usage = d.get("usage") if isinstance(d.get("usage"), dict) else None
    tokens = (
        "no usage"
        if usage is None
        else f"{esc(usage.get('input_tokens'))} in + {esc(usage.get('output_tokens'))} out tokens"
    )
    timing = "" if took is None else f", {took:.2f} s"
    calls = "".join(
        f'<div class="call">calls <b>{esc(c.get("name"))}</b>'
        f' <span class="eid">execution {esc(c.get("execution_id"))}</span>'
        f"{_json(c.get('input'))}</div>"
        for c in d.get("tool_calls") or []
        if isinstance(c, dict)
    )
    return (
        f'<div class="meta">{esc(d.get("model"))}: {tokens}{timing}</div>'
        f'<div class="text">{esc(d.get("text") or "")}</div>{calls}'
    )


def _tool_started(d: dict[str, Any]) -> tuple[str, str]:
    attempt = d.get("attempt")
    again = isinstance(attempt, int) and attempt > 1
    note = f' <span class="badge warn">ran again after a crash (attempt {attempt})</span>'
    body = (
        f"<b>{esc(d.get('name'))}</b> started"
        f'{_json(d.get("input"))}<div class="eid">execution {esc(d.get("execution_id"))}</div>'
    )
    return body, note if again else ""


_SHORT: dict[str, tuple[str, str]] = {
    # kind: (what the row says, the field it shows)
    log.TURN_STARTED: ("turn started, answering the prompt", "prompt"),
    log.TEXT_DISCARDED: ("the call's streamed text was discarded", "reason"),
    log.TOOL_INTERRUPTED: ("not run again", "message"),
    log.STOP_REQUESTED: ("stop requested", "reason"),
    log.TURN_FINISHED: ("the turn finished", ""),
    log.TURN_FAILED: ("the turn failed", "error"),
    log.TURN_STOPPED: ("the turn was stopped", "reason"),
    log.TURN_YIELDED: ("handed on to another worker", "reason"),
    log.OUTPUT_INVALID: ("the answer did not match the output type", "error"),
}


def _other(kind: str, d: dict[str, Any]) -> tuple[str, str]:
    if kind == log.APPROVAL_DECIDED:
        ok = d.get("approved") is True
        why = d.get("note") if ok else d.get("reason")
        badge = "ok" if ok else "bad"
        word = "approved" if ok else ("denied (expired)" if d.get("expired") else "denied")
        text = f"execution {esc(d.get('execution_id'))}" + (f": {esc(why)}" if why else "")
        return text, f' <span class="badge {badge}">{word}</span>'
    if kind in _SHORT:
        what, name = _SHORT[kind]
        bad = kind in (log.TURN_FAILED, log.TURN_STOPPED, log.OUTPUT_INVALID)
        note = f' <span class="badge {"bad" if bad else "ok"}">{esc(kind)}</span>'
        if kind in (log.TURN_STARTED, log.TURN_YIELDED, log.TEXT_DISCARDED, log.STOP_REQUESTED):
            note = ""
        shown = d.get(name) if name else None
        if kind == log.TURN_STARTED:
            shown = f"#{shown}"
        tail = f": {esc(shown)}" if shown else ""
        if kind == log.TURN_FINISHED and "output" in d:  # the validated answer
            tail = f", answering{_json(d['output'])}"
        return f'<div class="text">{esc(what)}{tail}</div>', note
    return _json(d), ""
