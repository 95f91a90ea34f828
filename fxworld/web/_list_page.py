"""The sessions page's HTML: what needs a person, the filters, the table of families.

Every value through :func:`~fxworld.web._timeline.esc`. The filters live in the
URL's query string (``attention``, ``agent``, ``context``, ``state``, ``active``,
``q``), so a reload, a bookmark or a link to a colleague keeps them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlencode

from fxworld.engine.session_filter import ANY_ATTENTION, SessionFilter
from fxworld.engine.summary import ATTENTION, STATES, Summary

from ._pages import PREVIEW_SHOWN
from ._timeline import clock, esc

__all__ = ["ACTIVE_CHOICES", "Table", "sessions_body", "sessions_table", "href"]

ACTIVE_CHOICES = ("1h", "24h", "7d", "30d")
"""The "last activity within" choices the page offers (``?active=`` takes any duration)."""
_DEPTH_SHOWN = 4


@dataclass(frozen=True)
class Table:
    """The rows of one sessions page: each session with its depth under its parent."""

    root: str
    rows: Sequence[tuple[int, Summary]]
    attention: Mapping[str, tuple[str, ...]]
    previews: Mapping[str, str | None]
    known: int
    #: each session's state, a child's approval counted as its parent's (``Families``)
    states: Mapping[str, str] = field(default_factory=dict)


def href(root: str, chosen: SessionFilter, **changes: str | int) -> str:
    """The sessions page's URL with ``chosen``'s filters, ``changes`` applied."""
    params: dict[str, str | int | list[str]] = {
        "attention": chosen.attention,
        "agent": chosen.agent,
        "context": [f"{k}={v}" for k, v in chosen.context],
        "state": chosen.state,
        "active": chosen.active,
        "q": chosen.search,
    }
    params.update(changes)
    kept = {k: v for k, v in params.items() if v}
    query = urlencode(kept, doseq=True)
    return f"{esc(root)}/{'?' + esc(query) if query else ''}"


def _state(state: str) -> str:
    return f'<span class="state st-{esc(state.replace(" ", "-"))}">{esc(state)}</span>'


def _needs(s: Summary, reasons: tuple[str, ...]) -> str:
    badges = " ".join(
        f'<span class="att att-{esc(name)}">{esc(ATTENTION.get(name, name))}</span>'
        for name in reasons
    )
    if s.marks:  # what ended turns left: a person may clear it
        badges += (
            f' <button class="clear" data-sid="{esc(s.session_id)}" data-upto="{s.seq}"'
            ' title="a person saw it: clear the mark (recorded in the log)">Clear</button>'
        )
    return badges


def sessions_table(table: Table) -> str:
    """The ``<tbody>`` of the sessions page (the page's script swaps it to refresh)."""
    cells = []
    for depth, s in table.rows:
        text = table.previews.get(s.session_id)
        preview = (
            '<span class="muted">-</span>'
            if text is None
            else f"{esc(text[:PREVIEW_SHOWN])}{'…' if len(text) > PREVIEW_SHOWN else ''}"
        )
        sid = esc(s.session_id)
        child = (
            f' class="child depth-{min(depth, _DEPTH_SHOWN)}" data-parent="{esc(s.parent)}"'
            if depth
            else ""
        )
        mark = '<span class="under" title="a child session of the row above">↳</span> '
        reasons = table.attention.get(s.session_id, ())
        cells.append(
            f'<tr data-sid="{sid}"{child}><td>{mark if depth else ""}'
            f'<a href="{esc(table.root)}/sessions/{sid}">{sid}</a></td>'
            f'<td class="agent">{esc(s.agent or "-")}</td>'
            f'<td class="preview">{preview}</td><td class="needs">{_needs(s, reasons)}</td>'
            f"<td>{_state(table.states.get(s.session_id, s.state))}</td>"
            f"<td>{clock(s.last_at)}</td><td class=num>{s.turns}</td>"
            f'<td class=num title="{s.input_tokens} in + {s.output_tokens} out">{s.tokens}</td>'
            f"<td class=num>{s.seq}</td></tr>"
        )
    return f'<tbody id="sessions" data-known="{table.known}">{"".join(cells)}</tbody>'


def _chips(root: str, chosen: SessionFilter, counts: Mapping[str, int] | None) -> str:
    links = []
    for name in ("", ANY_ATTENTION, *ATTENTION):
        label = "all sessions" if not name else "needs a person" if name == ANY_ATTENTION else None
        label = label or ATTENTION[name]
        count = "" if counts is None or not name else f" <b>{counts.get(name, 0)}</b>"
        current = ' aria-current="true"' if name == chosen.attention else ""
        css = f"chip att-{esc(name or 'all')}"
        links.append(
            f'<a class="{css}" data-attention="{esc(name)}"'
            f' href="{href(root, chosen, attention=name)}"{current}>{esc(label)}{count}</a>'
        )
    return f'<nav class="attention" aria-label="needs a person">{" ".join(links)}</nav>'


def _select(
    name: str,
    label: str,
    current: str,
    choices: Sequence[str],
    every: str,
    counts: Mapping[str, int] | None = None,
) -> str:
    options = [f'<option value="">{esc(every)}</option>']
    for value in choices:
        chosen = " selected" if value == current else ""
        count = f" ({counts.get(value, 0)})" if counts else ""
        options.append(f'<option value="{esc(value)}"{chosen}>{esc(value)}{count}</option>')
    select = f'<select name="{name}" id="f-{name}">{"".join(options)}</select>'
    return f"<label>{esc(label)} {select}</label>"


def _form(
    root: str, chosen: SessionFilter, agents: Sequence[str], states: Mapping[str, int] | None
) -> str:
    r = esc(root)
    keep = (
        f'<input type="hidden" name="attention" value="{esc(chosen.attention)}">'
        if chosen.attention
        else ""
    )
    context = " ".join(f"{k}={v}" for k, v in chosen.context[:1])
    more = "".join(
        f'<input type="hidden" name="context" value="{esc(k)}={esc(v)}">'
        for k, v in chosen.context[1:]
    )
    agent_choices = [*agents, "-"]
    if chosen.agent not in (*agent_choices, ""):
        agent_choices.append(chosen.agent)
    active = list(ACTIVE_CHOICES)
    if chosen.active not in (*active, ""):
        active.append(chosen.active)
    return (
        f'<form class="filters" method="get" action="{r}/">{keep}{more}'
        f'<input id="q" name="q" value="{esc(chosen.search)}" autocomplete="off"'
        ' aria-label="search" placeholder="text in a session id or its first prompt"> '
        f"{_select('agent', 'agent', chosen.agent, agent_choices, 'any agent')} "
        f'<label>context <input id="f-context" name="context" value="{esc(context)}"'
        ' placeholder="tenant=acme" size="14"></label> '
        f"{_select('state', 'state', chosen.state, STATES, 'any state', states)} "
        f"{_select('active', 'active within', chosen.active, active, 'any time')} "
        f'<button>Filter</button> <a href="{r}/" class="reset">reset</a></form>'
    )


def sessions_body(
    table: Table,
    chosen: SessionFilter,
    *,
    counts: Mapping[str, int] | None,
    agents: Sequence[str],
    states: Mapping[str, int] | None,
    page: int,
    more: bool,
    note: str,
) -> str:
    """The sessions page: what needs a person (``counts``: families per reason, when
    the world can list; ``states``: the families per state of their top session),
    the filters, the table, the pager."""
    root = table.root
    pager = ""
    if page > 1:
        pager += f'<a href="{href(root, chosen, page=page - 1)}">← newer</a> '
    if more:
        pager += f'<a href="{href(root, chosen, page=page + 1)}" id="older">older →</a>'
    live = "" if page > 1 else ' data-live="1"'
    order = (
        "newest activity first"
        if chosen.attention
        else "what needs a person first, then newest activity"
    )
    return (
        f"<h1>Sessions</h1>{_chips(root, chosen, counts)}{_form(root, chosen, agents, states)}"
        f'<p class="note">{esc(note)} Sessions known: <b id="known">{table.known}</b>;'
        f" {order}; a child session under its parent.</p>"
        f'<table class="sessions"{live}><thead><tr><th>session</th><th>agent</th>'
        "<th>first prompt</th><th>needs a person</th><th>state</th>"
        "<th>last activity (UTC)</th><th>turns</th><th>tokens</th>"
        f"<th>entries</th></tr></thead>{sessions_table(table)}</table>"
        f'<p class="pager">{pager}</p><p id="flash" class="note" aria-live="polite"></p>'
    )
