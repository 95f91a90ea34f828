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
- every entry of a tool call (its steps, its child session, its end; by
  ``execution_id``) draws the call's one card again, in the place of its first
  ``tool.started`` (``replaces``: that card's id): :mod:`~fxworld.web._calls`;
- a turn's end draws again the cards of the calls it left open (``updates``), and
  a child's report that comes after its turn ended goes into its call's card, in
  that turn's group;
- streamed text chunks of one model call are joined into one card;
- a child session's first prompt links to its parent; turns are numbered from the
  session's first (``next_turn``: the number of the next one seen).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fxworld.engine import log
from fxworld.scrub import shown

from ._calls import CALL_KINDS, Call, step_card
from ._html import (
    Shown,
    as_int,
    clock,
    entry_head,
    esc,
    seconds,
    session_link,
    text_html,
    value_html,
)
from ._retry import RETRY_PREFIX
from ._values import pointer

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


@dataclass(frozen=True)
class Row:
    """One entry as shown: ``html`` is the whole ``<li>`` (empty for a
    ``turn.started``, whose group's header says it all); ``call`` and ``text`` are
    set for a streamed text chunk (the page joins the chunks of one call); see the
    module for ``group``, ``opens``, ``head``, ``replaces`` and ``updates`` (cards
    drawn again: ``(card id, its HTML)``, such as the calls a turn's end cut)."""

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
    updates: tuple[tuple[str, str], ...] = ()


@dataclass
class OpenTurn:
    """A turn as far as the timeline has seen it (``number``: 1 for the session's
    first turn, 2 for the next...)."""

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
    number: int = 0

    @property
    def group(self) -> str:
        return f"t{self.seq}"


_OUTCOME = {
    log.TURN_FINISHED: ("finished", "st-idle"),
    log.TURN_FAILED: ("failed", "st-failed"),
    log.TURN_STOPPED: ("stopped", "st-stopped"),
}
_KEPT_CALLS = 2000  # calls a timeline remembers (a late report finds its card)


class Timeline:
    """Renders entries in log order; remembers the previous entry's time (each row
    shows the time since it), the last step boundary (a model message shows the
    time its call took), the turn in progress and the tool calls seen
    (:class:`~fxworld.web._calls.Call`). ``next_turn``: the number of the next
    turn it sees start."""

    def __init__(
        self,
        session_id: str,
        *,
        waiting: Collection[str] = (),
        next_turn: int = 1,
        asking: Collection[str] = (),
    ) -> None:
        self.session_id = session_id
        self.waiting = waiting
        self.asking = asking  # child sessions in which a call waits for a decision
        self.next_turn = next_turn
        self.turn: OpenTurn | None = None
        self._prompts: dict[int, Shown] = {}  # prompts seen, not answered yet
        self._calls: dict[str, Call] = {}  # execution id -> its call, in order
        self._tool_steps: dict[str, list[str]] = {}  # tool name -> the steps its calls ran
        self._asked: dict[str, tuple[Shown, str]] = {}  # eid -> its approval.requested, since
        self._previous: datetime | None = None
        self._boundary: datetime | None = None
        self._parked = False

    def resume(self, started: Shown, prompt: Shown | None) -> Row:
        """Continue a turn whose ``turn.started`` (and prompt) came before the entries
        given to :meth:`rows`: their rows then go in its group, which the row
        returned opens (its number: the one before ``next_turn``)."""
        self.next_turn -= 1
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
        body, note = "", ""
        if kind not in CALL_KINDS or eid is None or eid not in self._calls:
            body, note = self._body(kind, data, took, seq)
        if kind in (log.APPROVAL_REQUESTED, log.TURN_YIELDED, log.CHILD_STARTED, log.FENCE):
            self._parked = kind != log.FENCE  # the turn waits, held by no worker
        if kind in CALL_KINDS and eid is not None:
            call = self._call(item, eid, since)
            if call is not None:
                return self._call_row(item, call, eid)
        card = _card(item, since, body, note)
        if kind in (log.STEP_STARTED, log.STEP_FINISHED):  # its call is not on the page
            card = step_card(item, since, self.session_id)
        if kind == log.APPROVAL_REQUESTED and eid is not None and turn is not None:
            turn.asked.add(eid)
        if kind == log.APPROVAL_REQUESTED and eid is not None:
            self._asked[eid] = (item, since)
        updates: tuple[tuple[str, str], ...] = ()
        if kind == log.APPROVAL_DECIDED and eid in self._asked:  # its request waits no more
            asked, asked_since = self._asked[eid]
            decided = f'<div class="said">decided at #{seq}: {_decision(data)}</div>'
            again = self._approval(asked.data, asked.seq, decided=decided)
            note = f' <span class="badge">{esc(_decision(data, plain=True))}</span>'
            updates = ((f"e{asked.seq}", _card(asked, asked_since, again, note)),)
        if kind in log.TURN_END_KINDS and turn is not None:
            turn.end = kind
            updates = self._cut(turn, kind)
            self.turn = None
        model_call = str(data.get("call")) if kind == log.TEXT else None
        text = shown(str(data.get("text", ""))) if kind == log.TEXT else None
        return Row(
            seq,
            kind,
            card,
            model_call,
            text,
            eid,
            group="" if turn is None else turn.group,
            head="" if turn is None else self.head(turn),
            updates=updates,
        )

    def _call(self, item: Shown, eid: str, since: str) -> Call | None:
        """The call entry ``item`` belongs to (a new one for a first ``tool.started``);
        ``None`` for an entry whose call started before the page."""
        call = self._calls.get(eid)
        if call is None and item.kind == log.TOOL_STARTED:
            group = "" if self.turn is None else self.turn.group
            call = Call(self.session_id, item, since, group)
            self._calls[eid] = call
            if len(self._calls) > _KEPT_CALLS:
                del self._calls[next(iter(self._calls))]
            if self.turn is not None and eid not in self.turn.executions:
                self.turn.executions.add(eid)
                self.turn.tools.append(call.name)
            return call
        if call is not None:
            call.take(item)
            if item.kind == log.STEP_STARTED:
                known = self._tool_steps.setdefault(call.name, [])
                if str(item.data.get("step")) not in known:
                    known.append(str(item.data.get("step")))
        return call

    def _asking(self, turn: OpenTurn) -> bool:
        """Whether a call of ``turn`` waits for a child in which a call waits for a decision."""
        return any(
            (c := self._calls.get(eid)) is not None and c.open and c.child_id in self.asking
            for eid in turn.executions
        )

    def _call_row(self, item: Shown, call: Call, eid: str) -> Row:
        """The row of an entry of ``call``: its card, drawn again in its place."""
        turn = self.turn
        mine = turn is not None and call.group == turn.group
        return Row(
            item.seq,
            item.kind,
            call.html(self._tool_steps.get(call.name, ()), asking=call.child_id in self.asking),
            execution_id=eid,
            group=call.group,
            head=self.head(turn) if mine and turn is not None else "",
            replaces=call.card_id,
        )

    def _cut(self, turn: OpenTurn, kind: str) -> tuple[tuple[str, str], ...]:
        """Turn ``turn`` ended (``kind``): its calls learn it; those it left open are
        drawn again (what they say now)."""
        updates = []
        for eid in turn.executions:
            call = self._calls.get(eid)
            if call is None:
                continue
            was_open = call.open
            call.turn_ended(kind)
            if was_open:
                updates.append((call.card_id, call.html(self._tool_steps.get(call.name, ()))))
        return tuple(updates)

    def _open(self, item: Shown, prompt: Shown | None) -> Row:
        self.turn = _turn(item, prompt)
        self.turn.number = self.next_turn
        self.next_turn += 1
        self._prompts = {p: x for p, x in self._prompts.items() if p > self.turn.prompt}
        self._parked = False
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
        elif self._asking(turn):
            word, css = "waiting for approval in a child session", "st-waiting-for-approval"
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
        number = f"turn {turn.number}" if turn.number > 0 else "turn"
        return (
            f'<summary class="turn-head"><span class="turn-n">{number}</span>'
            f' <span class="state {css}">{word}</span> {prompt}'
            f' <span class="dur" title="from turn.started to its end">{duration}</span>'
            f' <span class="tools">{f"tools: {tools}" if tools else "no tools"}</span>'
            f' <span class="seq" title="the seq of its turn.started">at #{turn.seq},'
            f" started {clock(turn.started)}</span></summary>"
        )

    def _body(self, kind: str, d: dict[str, Any], took: float | None, seq: int) -> tuple[str, str]:
        """The row's body and a note for its head (a badge)."""
        sid = self.session_id
        if kind == log.PROMPT:  # the first one may hold the session's context, a parent
            context = ""
            if "context" in d:
                context = f"context{value_html(d['context'], sid, seq, pointer('context'))}"
            parent = _parent(d["parent"]) if isinstance(d.get("parent"), dict) else ""
            again = f"Retry{_by(d)}: the failed turn's prompt, sent again"
            retried = f'<div class="meta">{again}</div>' if "actor" in d else ""
            text = text_html(d.get("text", ""), sid, seq, pointer("text"))
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
            return _message(d, took, sid, seq), ""
        if kind in (log.TOOL_FINISHED, log.CHILD_FINISHED, log.TOOL_STARTED, log.CHILD_STARTED):
            return _call_alone(kind, d, sid, seq)  # its call's start is not on the page
        if kind == log.APPROVAL_REQUESTED:
            return self._approval(d, seq), ' <span class="badge wait">needs approval</span>'
        if kind == log.APPROVAL_DECIDED:
            body, note = _other(kind, d, sid, seq)
            asked = self._asked.get(str(d.get("execution_id")), (None, ""))[0]
            if asked is not None:  # what was decided: the call and its input
                what = value_html(asked.data.get("input"), sid, asked.seq, pointer("input"))
                body = (
                    f'{body}<div class="decided-call">the call: <b>{esc(asked.data.get("name"))}'
                    f"</b> (asked at #{asked.seq}) with the input{what}</div>"
                )
            return body, note
        return _other(kind, d, sid, seq)

    def _approval(self, d: dict[str, Any], seq: int, decided: str = "") -> str:
        eid = str(d.get("execution_id"))
        expires = d.get("expires_at") or "never"
        wait = "asked for a decision" if decided else "waits for a decision"
        body = (
            f"<b>{esc(d.get('name'))}</b> {wait} (expires: {esc(expires)})"
            f'<div class="meta">{"its input" if decided else "the input to approve"}:</div>'
            f"{value_html(d.get('input'), self.session_id, seq, pointer('input'))}"
            f'<div class="eid">execution {esc(eid)}</div>'
        )
        if decided:
            return body + decided
        if eid in self.waiting:
            body += decide_box(eid)
        return body


def decide_box(eid: str, label: str = "", *, session_id: str = "") -> str:
    """The controls that decide waiting call ``eid`` (``label``: HTML before them):
    a note (an approval's note, a denial's reason), Approve, and Deny, which the
    page's script asks to confirm before it is sent. ``session_id``: the session
    the call waits in, when it is not the page's (a child's)."""
    e = esc(eid)
    other = f' data-sid="{esc(session_id)}"' if session_id else ""
    return (
        f'<div class="decide" data-eid="{e}"{other}>{label}'
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


def _card(item: Shown, since: str, body: str, note: str) -> str:
    kind, data = item.kind, item.data
    attrs = f' data-call="{esc(data.get("call"))}"' if kind == log.TEXT else ""
    eid = data.get("execution_id")
    attrs += f' data-eid="{esc(eid)}"' if isinstance(eid, str) else ""
    return (
        f'<li class="entry k-{esc(kind.replace(".", "-"))}" id="e{item.seq}"'
        f' data-seq="{item.seq}"{attrs}>{entry_head(str(item.seq), item, since, esc(kind), note)}'
        f'<div class="body">{body}</div></li>'
    )


def _message(d: dict[str, Any], took: float | None, sid: str, seq: int) -> str:
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
        f"{value_html(c.get('input'), sid, seq, pointer('tool_calls', n, 'input'))}</div>"
        for n, c in enumerate(d.get("tool_calls") or [])
        if isinstance(c, dict)
    )
    text = text_html(d.get("text") or "", sid, seq, pointer("text"))
    return f'<div class="meta">{esc(d.get("model"))}: {tokens}{timing}</div>{text}{calls}'


def _call_alone(kind: str, d: dict[str, Any], sid: str, seq: int) -> tuple[str, str]:
    """An entry of a call whose ``tool.started`` is not on the page."""
    name = f"<b>{esc(d.get('name'))}</b>"
    if kind == log.CHILD_STARTED:
        child = session_link(d.get("session"), "child")
        return f"{name} runs in the child session {child}", ""
    if kind == log.TOOL_STARTED:
        return f"{name}{value_html(d.get('input'), sid, seq, pointer('input'))}", ""
    bad = d.get("is_error") is True
    note = ' <span class="badge bad">error</span>' if bad else ""
    child = f" (child session {session_link(d['session'], 'child')})" if "session" in d else ""
    output = value_html(d.get("output"), sid, seq, pointer("output"))
    return f"{name}{child} returned{output}", note


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


def _decision(d: Mapping[str, Any], *, plain: bool = False) -> str:
    """A decision in words: ``approved by <actor>``, ``denied (expired)``..."""
    ok = d.get("approved") is True
    word = "approved" if ok else ("denied (expired)" if d.get("expired") else "denied")
    if plain:
        return word
    return f"{word}{_by(d)}"


def _other(kind: str, d: dict[str, Any], sid: str, seq: int) -> tuple[str, str]:
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
            tail = f", answering{value_html(d['output'], sid, seq, pointer('output'))}"
        return f'<div class="text">{esc(what)}{tail}</div>', note
    return value_html(d, sid, seq, ""), ""


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
    where: dict[str, dict[str, str]] = {}  # card id -> the cards that hold it
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
            cards = group.cards
            group.head = row.head or group.head  # (a late report leaves its turn's as it was)
            group.ended = group.ended or row.kind in log.TURN_END_KINDS
        elif top and isinstance(top[-1], dict):
            cards = top[-1]
        else:
            cards = {}
            top.append(cards)
        card = row.replaces or f"e{row.seq}"  # a call's entry: in its card's place
        where.setdefault(card, cards)[card] = row.html
        for card, again in row.updates:
            if card in where:
                where[card][card] = again
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
