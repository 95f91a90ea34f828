"""The inspector's HTML pages, server-rendered: every value through :func:`esc`.

The pages load one stylesheet and one script from the package (``assets/``):
no CDN, nothing fetched from elsewhere, so the inspector works on a machine
without internet.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from fxworld.types import WakeState

from ._summary import Summary
from ._timeline import Row, clock, esc

__all__ = [
    "layout",
    "sessions_table",
    "sessions_body",
    "session_body",
    "wake_text",
    "wakes_body",
]


def layout(root: str, title: str, body: str, *, namespace: str) -> str:
    r = esc(root)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · fxworld inspector</title>"
        f'<link rel="stylesheet" href="{r}/assets/inspector.css"></head>'
        f'<body data-root="{r}"><header><a class="brand" href="{r}/">fxworld inspector</a>'
        f'<nav><a href="{r}/">Sessions</a> <a href="{r}/wakes">Wakes</a></nav>'
        f'<span class="ns">namespace {esc(namespace)}</span></header>'
        f"<main>{body}</main>"
        f'<script src="{r}/assets/inspector.js"></script></body></html>'
    )


def _state(state: str) -> str:
    return f'<span class="state st-{esc(state.replace(" ", "-"))}">{esc(state)}</span>'


def sessions_table(root: str, rows: Sequence[Summary], known: int) -> str:
    """The ``<tbody>`` of the sessions page (the page's script swaps it to refresh)."""
    cells = "".join(
        f'<tr data-sid="{esc(s.session_id)}"><td><a href="{esc(root)}/sessions/'
        f'{esc(s.session_id)}">{esc(s.session_id)}</a></td><td>{_state(s.state)}</td>'
        f"<td>{clock(s.last_at)}</td><td class=num>{s.turns}</td>"
        f'<td class=num title="{s.input_tokens} in + {s.output_tokens} out">{s.tokens}</td>'
        f"<td class=num>{s.seq}</td></tr>"
        for s in rows
    )
    return f'<tbody id="sessions" data-known="{known}">{cells}</tbody>'


def sessions_body(
    root: str,
    rows: Sequence[Summary],
    *,
    query: str,
    page: int,
    more: bool,
    known: int,
    note: str,
) -> str:
    r = esc(root)
    pager = ""
    if page > 1:
        pager += f'<a href="{r}/?page={page - 1}">← newer</a> '
    if more:
        pager += f'<a href="{r}/?page={page + 1}" id="older">older →</a>'
    live = "" if query or page > 1 else ' data-live="1"'
    return (
        f'<h1>Sessions</h1><form class="search" method="get" action="{r}/">'
        f'<input id="q" name="q" value="{esc(query)}" placeholder="session id prefix" '
        'autocomplete="off"> <button>Search</button></form>'
        f'<p class="note">{esc(note)} Sessions known: <b id="known">{known}</b>;'
        " newest activity first.</p>"
        f'<table class="sessions"{live}><thead><tr><th>session</th><th>state</th>'
        "<th>last activity (UTC)</th><th>turns</th><th>tokens</th><th>entries</th></tr></thead>"
        f'{sessions_table(root, rows, known)}</table><p class="pager">{pager}</p>'
    )


def session_body(
    root: str,
    summary: Summary,
    rows: Sequence[Row],
    *,
    first: int,
    last: int,
    live: bool,
    wake: str,
) -> str:
    r, sid = esc(root), esc(summary.session_id)
    older = (
        f'<a id="older" href="{r}/sessions/{sid}?before={first}">← entries before #{first}</a>'
        if first > 1
        else ""
    )
    newer = "" if live else f'<a href="{r}/sessions/{sid}">latest entries →</a>'
    stop = "" if summary.state in ("running", "waiting for approval") else " hidden"
    waiting = "".join(
        f'<div class="decide" data-eid="{esc(e)}"><b>{esc(n)}</b> <code>{esc(e)}</code> '
        '<button class="approve">Approve</button> <button class="deny">Deny</button></div>'
        for e, n in summary.waiting.items()
    )
    return (
        f'<h1>Session <code>{sid}</code></h1><div class="summary" id="summary">'
        f'state <span id="state">{_state(summary.state)}</span>'
        f' · turns <b id="turns">{summary.turns}</b>'
        f' · tokens <b id="tokens">{summary.tokens}</b> · entries <b id="entries">{summary.seq}</b>'
        f' · worker epoch <b id="epoch">{summary.epoch or "-"}</b>'
        f' · wake (when loaded): <span id="wake">{wake}</span>'
        f' <button id="stop" class="stop"{stop}>Stop</button></div>'
        f'<div id="waiting">{waiting}</div><p id="flash" class="note"></p>'
        f'<p class="pager">{older} {newer}</p>'
        f'<ol class="timeline" id="timeline" data-sid="{sid}" data-last="{last}"'
        f' data-live="{1 if live else 0}">{"".join(x.html for x in rows)}</ol>'
    )


def wake_text(state: WakeState | None, now: datetime) -> str:
    if state is None:
        return "none pending"
    due = "due" if state.due_at <= now else f"due at {clock(state.due_at)}"
    if state.leased_until is not None:
        lease = f"leased until {clock(state.leased_until)} (attempt {state.attempt})"
        return lease if state.due_at == state.leased_until else f"{due}, {lease}"
    return f"{due} (attempt {state.attempt})" if state.attempt else due


def wakes_body(
    root: str, wakes: Sequence[WakeState] | None, now: datetime, *, after: str, more: bool
) -> str:
    if wakes is None:
        return (
            "<h1>Wakes</h1><p>This world cannot say which wakes are pending "
            "(it has no <code>list_wakes</code>).</p>"
        )
    r = esc(root)
    rows = "".join(
        f'<tr><td><a href="{r}/sessions/{esc(w.session_id)}">{esc(w.session_id)}</a></td>'
        f"<td>{'due' if w.due_at <= now else 'later'}</td><td>{clock(w.due_at)}</td>"
        f"<td>{clock(w.leased_until) if w.leased_until else 'not leased'}</td>"
        f"<td class=num>{w.attempt}</td></tr>"
        for w in wakes
    )
    pager = (
        f'<a href="{r}/wakes?after={esc(wakes[-1].session_id)}">next →</a>'
        if more and wakes
        else ""
    )
    start = f" after {esc(after)}" if after else ""
    return (
        f"<h1>Wakes</h1><p class=note>Pending wakes of this namespace{start}, by session id."
        f" Times are UTC, as the world keeps them; now, on this machine: {clock(now)}.</p>"
        "<table class=wakes><thead><tr><th>session</th><th>due</th><th>due at</th>"
        "<th>leased until</th><th>attempt</th>"
        f'</tr></thead><tbody id="wakes">{rows}</tbody></table><p class=pager>{pager}</p>'
    )
