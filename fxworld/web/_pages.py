"""The inspector's HTML pages, server-rendered: every value through :func:`esc`.

The pages load one stylesheet and one script from the package (``assets/``):
no CDN, nothing fetched from elsewhere, so the inspector works on a machine
without internet.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from fxworld.engine.summary import Summary
from fxworld.types import WakeState

from ._timeline import Row, assemble, clock, esc, seconds

__all__ = [
    "PREVIEW_SHOWN",
    "layout",
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


PREVIEW_SHOWN = 80
"""Characters of a first prompt the sessions page shows."""


def session_body(
    root: str,
    summary: Summary,
    rows: Sequence[Row],
    *,
    first: int,
    turns_before: int,
    last: int,
    live: bool,
    wake: str,
    waiting: str,
    state: str | None = None,
) -> str:
    """A session's page. ``waiting``: the boxes of the calls that wait for a
    decision (:func:`~fxworld.web._session_view.waiting_html`); ``turns_before``:
    the turns started before entry ``first``, the page's first; ``state``: the
    session's state when its own log does not say it all (a child's approval is
    its parent's too), else ``summary.state``."""
    state = state or summary.state
    r, sid = esc(root), esc(summary.session_id)
    older = (
        f'<a id="older" href="{r}/sessions/{sid}?before={first}&amp;turns={turns_before}">'
        f"← load earlier turns (before #{first}; {turns_before} turns)</a>"
        if first > 1
        else ""
    )
    newer = "" if live else f'<a href="{r}/sessions/{sid}">latest turns →</a>'
    stop = "" if state in ("running", "waiting for approval") else " hidden"
    takeovers = (
        "a worker died or lost its lease in the middle of a turn, and another one took the"
        f" turn over (the session's latest worker epoch: {summary.epoch or '-'})"
    )
    timeline = assemble(rows, retry=state == "failed")
    return (
        f'<h1>Session <code>{sid}</code></h1><div class="summary" id="summary">'
        f'<span id="state">{_state(state)}</span>'
        f' · <b id="turns">{summary.turns}</b> turns'
        f' · <b id="tokens">{summary.tokens}</b> tokens · <b id="entries">{summary.seq}</b> entries'
        f' · <span title="{takeovers}">worker takeovers: <b id="takeovers">'
        f"{summary.takeovers}</b></span>"
        f' · next wake: <span id="wake" title="as it was when the page loaded">{wake}</span>'
        f' <button id="stop" class="stop"{stop}>Stop…</button>'
        '<span id="stop-confirm" class="confirm" hidden> Stop the running turn? '
        '<input id="stop-reason" maxlength="2000" aria-label="reason for the stop"'
        ' placeholder="reason, optional"> <button id="stop-yes" class="stop">Yes, stop it</button>'
        ' <button id="stop-cancel" class="cancel">Cancel</button></span></div>'
        f'<div id="waiting">{waiting}</div><p id="flash" class="note" aria-live="polite"></p>'
        f'<p class="pager">{older} {newer}</p>'
        f'<ol class="timeline" id="timeline" data-sid="{sid}" data-last="{last}"'
        f' data-live="{1 if live else 0}">{timeline}</ol>'
    )


def wake_text(state: WakeState | None, now: datetime) -> str:
    """A session's next wake in plain words."""
    if state is None:
        return "none (nothing asks a worker to run this session)"
    if state.leased_until is not None and state.due_at == state.leased_until:
        return (
            f"a worker runs it now; if it does not finish, again at {clock(state.leased_until)}"
            f" (delivery {state.attempt})"
        )
    due = "now" if state.due_at <= now else f"in {seconds((state.due_at - now).total_seconds())}"
    when = "" if state.due_at <= now else f" (at {clock(state.due_at)})"
    if state.leased_until is not None:
        return f"{due}{when}, after the worker holding it (until {clock(state.leased_until)})"
    again = f", delivery {state.attempt + 1}" if state.attempt else ""
    return f"{due}{when}{again}"


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
