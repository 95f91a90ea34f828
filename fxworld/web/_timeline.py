"""The inspector's timeline: each log entry as one HTML card, escaped and scrubbed,
in groups by turn.

Every piece of text an entry shows (a prompt, model text, a tool's input and
output, an error, a reason) passes through the one scrubber
(:func:`fxworld.scrub.shown`, as the CLI shows waiting calls), then through
``html.escape``: a key or a card number in a tool's input is masked, and no entry
can inject markup. The rows of a page and the rows streamed live are made by the
same :class:`Timeline`, and put in place by the same rules (:func:`assemble` on
the server, the page's script in the browser), so both read alike:

- a ``turn.started`` opens a group (``opens``: its HTML); the rows of the turn go
  in it (``group``: its id), and each of them brings the group's header again
  (``head``: the prompt, the outcome, the duration, the tools);
- a tool's ``tool.finished`` (or ``tool.interrupted``) becomes one card with its
  ``tool.started``, which it replaces (``replaces``: the started card's id), with
  the time the call took;
- streamed text chunks of one model call are joined into one card;
- an agent tool's call: its ``child.started`` replaces the call's card with one
  that links to the child session, and its ``child.finished`` ends that card as
  a ``tool.finished`` does; a child session's first prompt links to its parent.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import quote

from fxworld.engine import log
from fxworld.scrub import shown

from ._retry import RETRY_PREFIX

__all__ = [
    "session_link",
    "Row",
    "Shown",
    "Timeline",
    "OpenTurn",
    "RETRY",
    "decide_box",
    "assemble",
    "group_html",
    "as_int",
    "clock",
    "esc",
    "seconds",
]

_HEAD_PROMPT = 160  # characters of a prompt a turn's header shows


def esc(value: object) -> str:
    """``value`` as text for HTML: scrubbed, cut to ``SHOWN_CHARS`` with no part of
    a secret left at the cut (the log keeps it whole), escaped."""
    return escape(shown(str(value)), quote=True)


def session_link(session_id: object, css: str) -> str:
    """A link to another session's page (relative: the pages are ``…/sessions/{id}``)."""
    sid = str(session_id)
    return f'<a class="session-link {css}" href="./{escape(quote(sid, safe=""))}">{esc(sid)}</a>'


def _json(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f'<pre class="json">{esc(text)}</pre>'


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
    """One entry as shown: ``html`` is the whole ``<li>`` (empty for a
    ``turn.started``, whose group's header says it all); ``call`` and ``text`` are
    set for a streamed text chunk (the page joins the chunks of one call); see the
    module for ``group``, ``opens``, ``head`` and ``replaces``."""

    seq: int
    kind: str
    html: str
    call: str | None = None
    text: str | None = None
    execution_id: str | None = None
    group: str = ""
    opens: str = ""
    head: str = ""
    replaces: str = ""


@dataclass
class OpenTurn:
    """A turn as far as the timeline has seen it."""

    seq: int  # its turn.started
    prompt: int
    started: datetime
    prompt_text: str | None = None  # None: the prompt is hidden, or not read
    retry: bool = False  # its prompt was sent by a Retry (its key: ``retry-<seq>``)
    tools: list[str] = field(default_factory=list)
    executions: set[str] = field(default_factory=set)  # of its tool.started entries
    asked: set[str] = field(default_factory=set)  # of its approval.requested entries
    last_at: datetime | None = None
    end: str = ""  # the kind that ended it

    @property
    def group(self) -> str:
        return f"t{self.seq}"


_OUTCOME = {
    log.TURN_FINISHED: ("finished", "st-idle"),
    log.TURN_FAILED: ("failed", "st-failed"),
    log.TURN_STOPPED: ("stopped", "st-stopped"),
}


class Timeline:
    """Renders entries in log order; remembers the previous entry's time (each row
    shows the time since it), the last step boundary (a model message shows the
    time its call took), the turn in progress and its started tool calls."""

    def __init__(self, session_id: str, *, waiting: Collection[str] = ()) -> None:
        self.session_id = session_id
        self.waiting = waiting
        self.turn: OpenTurn | None = None
        self._prompts: dict[int, Shown] = {}  # prompts seen, not answered yet
        self._started: dict[str, tuple[Shown, str]] = {}  # eid -> tool.started, its card
        self._previous: datetime | None = None
        self._boundary: datetime | None = None
        self._parked = False

    def resume(self, started: Shown, prompt: Shown | None) -> Row:
        """Continue a turn whose ``turn.started`` (and prompt) came before the entries
        given to :meth:`rows`: their rows then go in its group, which the row
        returned opens."""
        return self._open(started, prompt)

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
        seq, kind, data, at = item.seq, item.kind, item.data, item.at
        since = "" if self._previous is None else f"+{(at - self._previous).total_seconds():.2f} s"
        took = None if self._boundary is None else (at - self._boundary).total_seconds()
        self._previous = at
        if kind != log.TEXT:
            self._boundary = at
        eid = data.get("execution_id")
        eid = eid if isinstance(eid, str) else None
        if kind == log.PROMPT:
            self._prompts[seq] = item
        if kind == log.TURN_STARTED:
            return self._open(item, self._prompts.get(as_int(data.get("prompt"))))
        turn = self.turn
        if turn is not None:
            turn.last_at = at
        body, note = self._body(kind, data, took)
        if kind in (log.APPROVAL_REQUESTED, log.TURN_YIELDED, log.CHILD_STARTED, log.FENCE):
            self._parked = kind != log.FENCE  # the turn waits, held by no worker
        card = _card(item, since, body, note)
        replaces = ""
        if kind == log.APPROVAL_REQUESTED and eid is not None and turn is not None:
            turn.asked.add(eid)
        if kind == log.TOOL_STARTED and eid is not None:
            self._started[eid] = (item, since)
            if turn is not None and eid not in turn.executions:
                turn.executions.add(eid)
                turn.tools.append(str(data.get("name")))
        elif kind in _CALL_ENDS and eid in self._started:
            started, started_since = self._started[eid]
            if kind != log.CHILD_STARTED:  # (its child.finished replaces the card again)
                del self._started[eid]
            card = _tool_card(started, started_since, item)
            replaces = f"e{started.seq}"
        if kind in log.TURN_END_KINDS and turn is not None:
            turn.end = kind
            self.turn, self._started = None, {}
        call = str(data.get("call")) if kind == log.TEXT else None
        text = shown(str(data.get("text", ""))) if kind == log.TEXT else None
        return Row(
            seq,
            kind,
            card,
            call,
            text,
            eid,
            group="" if turn is None else turn.group,
            head="" if turn is None else self.head(turn),
            replaces=replaces,
        )

    def _open(self, item: Shown, prompt: Shown | None) -> Row:
        self.turn = _turn(item, prompt)
        self._prompts = {p: x for p, x in self._prompts.items() if p > self.turn.prompt}
        self._started, self._parked = {}, False
        head = self.head(self.turn)
        group = self.turn.group
        opens = group_html(group, item.seq, head, "", open=True)
        return Row(item.seq, item.kind, "", group=group, opens=opens, head=head)

    def head(self, turn: OpenTurn) -> str:
        """The ``<summary>`` of a turn's group: outcome, prompt, duration, tools."""
        if turn.end:
            word, css = _OUTCOME.get(turn.end, (turn.end, ""))
        elif turn.asked & set(self.waiting):
            word, css = "waiting for approval", "st-waiting-for-approval"
        else:
            word, css = "running", "st-running"
        last = (turn.last_at or turn.started) if turn.end else datetime.now(UTC)
        took = seconds(max(0.0, (last - turn.started).total_seconds()))
        duration = took if turn.end else f"{took} so far"
        if turn.prompt_text is None:
            prompt = f'<span class="prompt muted">prompt #{turn.prompt}</span>'
        else:
            short = turn.prompt_text[:_HEAD_PROMPT]
            more = "…" if len(turn.prompt_text) > _HEAD_PROMPT else ""
            prompt = f'<span class="prompt">{esc(short)}{more}</span>'
        if turn.retry:
            prompt = f'<span class="badge" title="sent by Retry">retry</span> {prompt}'
        counts: dict[str, int] = {}
        for name in turn.tools:
            counts[name] = counts.get(name, 0) + 1
        tools = ", ".join(f"{esc(n)}{f' &times;{c}' if c > 1 else ''}" for n, c in counts.items())
        return (
            f'<summary class="turn-head"><span class="state {css}">{word}</span> {prompt}'
            f' <span class="dur" title="from turn.started to its end">{duration}</span>'
            f' <span class="tools">{f"tools: {tools}" if tools else "no tools"}</span>'
            f' <span class="seq">turn #{turn.seq}, started {clock(turn.started)}</span></summary>'
        )

    def _body(self, kind: str, d: dict[str, Any], took: float | None) -> tuple[str, str]:
        """The row's body and a note for its head (a badge)."""
        if kind == log.PROMPT:  # the first one may hold the session's context, a parent
            context = f"context{_json(d['context'])}" if "context" in d else ""
            parent = _parent(d["parent"]) if isinstance(d.get("parent"), dict) else ""
            again = f"Retry{_by(d)}: the failed turn's prompt, sent again"
            retried = f'<div class="meta">{again}</div>' if "actor" in d else ""
            text = f'<div class="text">{esc(d.get("text", ""))}</div>'
            return f"{text}{retried}{parent}{context}", ""
        if kind == log.TEXT:
            return f'<span class="text">{esc(d.get("text", ""))}</span>', ""
        if kind == log.FENCE:
            epoch = esc(d.get("epoch"))
            if self.turn is not None and not self._parked:  # its worker crashed, or lost its lease
                note = ' <span class="badge warn">takeover</span>'
                return f"another worker (epoch {epoch}) took the running turn over", note
            if self.turn is not None:
                return f"a worker (epoch {epoch}) took the waiting turn up again", ""
            return f"a worker (epoch {epoch}) took the session", ""
        if kind == log.MESSAGE:
            return _message(d, took), ""
        if kind == log.TOOL_STARTED:
            return _tool_started(d)
        if kind in (log.TOOL_FINISHED, log.CHILD_FINISHED):
            return _tool_output(d)
        if kind == log.CHILD_STARTED:
            child = session_link(d.get("session"), "child")
            note = ' <span class="badge wait">waits for its child</span>'
            return f"<b>{esc(d.get('name'))}</b> runs in the child session {child}", note
        if kind == log.APPROVAL_REQUESTED:
            return self._approval(d), ' <span class="badge wait">needs approval</span>'
        return _other(kind, d)

    def _approval(self, d: dict[str, Any]) -> str:
        eid = str(d.get("execution_id"))
        expires = d.get("expires_at") or "never"
        body = (
            f"<b>{esc(d.get('name'))}</b> waits for a decision (expires: {esc(expires)})"
            f'{_json(d.get("input"))}<div class="eid">execution {esc(eid)}</div>'
        )
        if eid in self.waiting:
            body += decide_box(eid)
        return body


_CALL_ENDS = frozenset(
    {log.TOOL_FINISHED, log.TOOL_INTERRUPTED, log.CHILD_STARTED, log.CHILD_FINISHED}
)
"""The kinds that replace a call's card (its ``tool.started``'s): all but
``child.started`` end it."""


def decide_box(eid: str, label: str = "") -> str:
    """The controls that decide waiting call ``eid`` (``label``: HTML before them):
    a note (an approval's note, a denial's reason), Approve, and Deny, which the
    page's script asks to confirm before it is sent."""
    e = esc(eid)
    return (
        f'<div class="decide" data-eid="{e}">{label}'
        f'<input class="decision-note" maxlength="2000" aria-label="note or reason for {e}"'
        ' placeholder="note or reason (optional)"> '
        '<button class="approve">Approve</button> <button class="deny">Deny…</button>'
        '<span class="confirm" hidden> Deny this call? The model hears the reason. '
        '<button class="deny yes">Yes, deny</button> <button class="cancel">Cancel</button>'
        "</span></div>"
    )


def _parent(parent: Mapping[str, Any]) -> str:
    """A child session's first prompt: the call of its parent that made it."""
    return (
        f'<div class="parent">asked by session {session_link(parent.get("session"), "parent")}'
        f" (its call of <b>{esc(parent.get('name'))}</b>,"
        f' <span class="eid">execution {esc(parent.get("execution_id"))}</span>)</div>'
    )


def _turn(started: Shown, prompt: Shown | None) -> OpenTurn:
    """The turn ``started`` opens, answering ``prompt`` (``None``: hidden, or not read)."""
    text = key = None
    if prompt is not None:
        text, key = str(prompt.data.get("text", "")), prompt.data.get("key")
    retry = isinstance(key, str) and key.startswith(RETRY_PREFIX)
    at = started.at
    return OpenTurn(started.seq, as_int(started.data.get("prompt")), at, text, retry, last_at=at)


def as_int(value: object) -> int:
    """``value`` if it is an int (not a bool), else 0: a log field as a number."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _head(seq: str, item: Shown, since: str, kind: str, note: str) -> str:
    epoch = "" if item.epoch is None else f"epoch {item.epoch}"
    return (
        f'<div class="head"><span class="seq">#{seq}</span>'
        f' <span class="at" title="UTC">{clock(item.at)}</span>'
        f' <span class="since">{since}</span> <span class="kind">{kind}</span>'
        f' <span class="worker">{epoch}</span>{note}</div>'
    )


def _card(item: Shown, since: str, body: str, note: str) -> str:
    kind, data = item.kind, item.data
    attrs = f' data-call="{esc(data.get("call"))}"' if kind == log.TEXT else ""
    eid = data.get("execution_id")
    attrs += f' data-eid="{esc(eid)}"' if isinstance(eid, str) else ""
    return (
        f'<li class="entry k-{esc(kind.replace(".", "-"))}" id="e{item.seq}"'
        f' data-seq="{item.seq}"{attrs}>{_head(str(item.seq), item, since, esc(kind), note)}'
        f'<div class="body">{body}</div></li>'
    )


def _tool_card(started: Shown, since: str, end: Shown) -> str:
    """One card for a tool call: its start and how it ended, and the time between."""
    took = seconds((end.at - started.at).total_seconds())
    d = started.data
    if end.kind == log.CHILD_STARTED:
        note = ' <span class="badge wait">waits for its child session</span>'
        child = session_link(end.data.get("session"), "child")
        result = f'<div class="text">runs in the child session {child}</div>'
    elif end.kind == log.TOOL_INTERRUPTED:
        note = (
            f' <span class="badge warn">interrupted: not run again ({took} after its start)</span>'
        )
        result = f'<div class="text">{esc(end.data.get("message", ""))}</div>'
    else:
        bad = end.data.get("is_error") is True
        word = "error" if bad else "ok"
        note = f' <span class="badge {"bad" if bad else "ok"}">{word} in {took}</span>'
        result = f"{'raised' if bad else 'returned'}{_json(end.data.get('output'))}"
        if end.kind == log.CHILD_FINISHED:
            child = session_link(end.data.get("session"), "child")
            result = f"its child session {child} answered{_json(end.data.get('output'))}"
    running = end.data.get("running")
    if isinstance(running, list) and running:  # a thread of it was not stopped
        what = ", ".join(str(p) for p in running)
        note += f' <span class="badge warn">still running in its thread: {esc(what)}</span>'
    again, started_note = _tool_started(d)
    kinds = f"{esc(started.kind)} → {esc(end.kind)}"
    end_class = esc(end.kind.replace(".", "-"))
    return (
        f'<li class="entry k-tool-started k-{end_class}" id="e{started.seq}" data-seq="{end.seq}"'
        f' data-eid="{esc(d.get("execution_id"))}">'
        f"{_head(f'{started.seq} → #{end.seq}', started, since, kinds, started_note + note)}"
        f'<div class="body">{again}<div class="result">{result}</div></div></li>'
    )


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
        f"<b>{esc(d.get('name'))}</b>"
        f'{_json(d.get("input"))}<div class="eid">execution {esc(d.get("execution_id"))}</div>'
    )
    return body, note if again else ""


def _tool_output(d: dict[str, Any]) -> tuple[str, str]:
    bad = d.get("is_error") is True
    note = ' <span class="badge bad">error</span>' if bad else ""
    child = f" (child session {session_link(d['session'], 'child')})" if "session" in d else ""
    return f"<b>{esc(d.get('name'))}</b>{child} returned{_json(d.get('output'))}", note


_SHORT: dict[str, tuple[str, str]] = {
    # kind: (what the row says, the field it shows)
    log.TEXT_DISCARDED: ("the call's streamed text was discarded", "reason"),
    log.TOOL_INTERRUPTED: ("started before a crash; not run again", "message"),
    log.TURN_FINISHED: ("the turn finished", ""),
    log.TURN_FAILED: ("the turn failed", "error"),
    log.TURN_STOPPED: ("the turn was stopped", "reason"),
    log.TURN_YIELDED: ("handed on to another worker", "reason"),
    log.OUTPUT_INVALID: ("the answer did not match the output type", "error"),
    log.TOOL_LATE: ("ended in its thread after its call was cut", "output"),
}
_BADGE: dict[str, tuple[str, str]] = {
    # kind: (badge class, word): a word other than the kind, which the card shows once
    log.TOOL_INTERRUPTED: ("warn", "interrupted"),
    log.TURN_FINISHED: ("ok", "finished"),
    log.TURN_FAILED: ("bad", "failed"),
    log.TURN_STOPPED: ("warn", "stopped"),
    log.OUTPUT_INVALID: ("bad", "refused"),
    log.TOOL_LATE: ("warn", "late"),
}


def _by(d: Mapping[str, Any]) -> str:
    """`` by <actor>`` for an entry that records who asked for it (else nothing)."""
    actor = d.get("actor")
    return f' by <b class="actor">{esc(actor)}</b>' if actor is not None else ""


def _other(kind: str, d: dict[str, Any]) -> tuple[str, str]:
    if kind == log.APPROVAL_DECIDED:
        ok = d.get("approved") is True
        why = d.get("note") if ok or "note" in d else d.get("reason")
        badge = "ok" if ok else "bad"
        word = "approved" if ok else ("denied (expired)" if d.get("expired") else "denied")
        said = "note" if ok else "reason"
        note = f'<div class="said">{said}: <q>{esc(why)}</q></div>' if why else ""
        text = f'{word}{_by(d)}<div class="eid">execution {esc(d.get("execution_id"))}</div>'
        return f"{text}{note}", f' <span class="badge {badge}">{word}</span>'
    if kind == log.STOP_REQUESTED:
        why = d.get("reason")
        tail = f'<div class="said">reason: <q>{esc(why)}</q></div>' if why else ""
        return f'<div class="text">stop requested{_by(d)}</div>{tail}', ""
    if kind in _SHORT:
        what, name = _SHORT[kind]
        css, word = _BADGE.get(kind, ("", ""))
        note = f' <span class="badge {css}">{word}</span>' if word else ""
        shown = d.get(name) if name else None
        tail = f": {esc(shown)}" if shown else ""
        if kind == log.TURN_FINISHED and "output" in d:  # the validated answer
            tail = f", answering{_json(d['output'])}"
        return f'<div class="text">{esc(what)}{tail}</div>', note
    return _json(d), ""


RETRY = (
    '<div class="turn-actions"><button class="retry">Retry this turn</button>'
    " sends its prompt again, as a new prompt</div>"
)
"""The Retry button, at the end of the group of a latest turn that failed."""


def group_html(group: str, seq: int, head: str, cards: str, *, open: bool) -> str:
    """A turn's group: its header (``<summary>``) and its cards."""
    return (
        f'<li class="turn" id="{group}" data-seq="{seq}"><details{" open" if open else ""}>'
        f'{head}<ol class="entries">{cards}</ol></details></li>'
    )


@dataclass
class _Group:
    id: str
    seq: int
    head: str
    cards: dict[str, str]  # card id -> its HTML, in order
    ended: bool = False


def assemble(rows: Sequence[Row], *, retry: bool = False) -> str:
    """The timeline's HTML from its rows, put in place as the page's script does
    with rows streamed live: a turn's group takes the cards since the group before
    it (its prompt, a fence); every turn that ended is collapsed, but the last one.
    ``retry``: the session's latest turn failed, and its group shows :data:`RETRY`."""
    top: list[dict[str, str] | _Group] = []  # loose cards, and groups, in order
    groups: dict[str, _Group] = {}
    for row in rows:
        group = groups.get(row.group)
        if row.opens:
            loose = top[-1] if top else None
            if isinstance(loose, dict):
                top.pop()
            else:
                loose = {}
            groups[row.group] = _Group(row.group, row.seq, row.head, loose)
            top.append(groups[row.group])
            continue
        if group is not None:
            cards, group.head, group.ended = group.cards, row.head, row.kind in log.TURN_END_KINDS
        elif top and isinstance(top[-1], dict):
            cards = top[-1]
        else:
            cards = {}
            top.append(cards)
        cards[row.replaces or f"e{row.seq}"] = row.html  # a tool's end: in its start's place
    last = next((x for x in reversed(top) if isinstance(x, _Group)), None)
    html: list[str] = []
    for x in top:
        if isinstance(x, dict):
            html.extend(x.values())
            continue
        cards_html = "".join(x.cards.values()) + (RETRY if retry and x is last else "")
        open_ = not x.ended or x is last
        html.append(group_html(x.id, x.seq, x.head, cards_html, open=open_))
    return "".join(html)
