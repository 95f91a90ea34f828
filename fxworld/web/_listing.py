"""What the sessions page lists: the index's families, filtered, what needs a person first.

:func:`chosen_filter` reads the page's query string (``?attention=``, ``agent=``,
``context=key=value`` (repeatable), ``state=``, ``active=`` a duration, ``q=`` a
text within ids and first prompts) into a
:class:`~fxworld.engine.session_filter.SessionFilter`; :func:`pick` keeps the
families (a session with its child sessions, :class:`~fxworld.web._summary.Families`)
that pass it, and counts, among those passing all but the attention part, the
families that need a person for each reason. One pass over the index in memory: no
log is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from fxworld.engine.session_filter import ANY_ATTENTION, SessionFilter
from fxworld.engine.summary import ATTENTION, Summary
from fxworld.errors import InvalidArgument

from ._refusals import HTTPError
from ._summary import Families

__all__ = ["chosen_filter", "pick"]

_KEPT = 32  # filters' picks kept per view


def chosen_filter(params: Mapping[str, str], contexts: list[str]) -> SessionFilter:
    """The filter a query string asks for (``contexts``: its ``context`` values);
    a bad part answers 400 with what is expected."""
    try:
        return SessionFilter.make(
            attention=params.get("attention"),
            agent=params.get("agent"),
            context=contexts,
            state=params.get("state"),
            active=params.get("active"),
            search=params.get("q"),
        )
    except InvalidArgument as e:
        raise HTTPError(400, "invalid_request", str(e)) from None


def pick(
    view: Families, chosen: SessionFilter, now: datetime, *, previews: bool
) -> tuple[list[Summary], dict[str, int]]:
    """The top rows that pass ``chosen`` (without an attention filter: those that need
    a person first, then the rest, each newest activity first), and the counts per
    reason (``"any"``: needing a person at all). A family passes the parts but
    attention when its parent or one of its descendants does."""
    key = (chosen, previews)
    kept = view.picked.get(key)
    if kept is not None and not chosen.within:  # ("active within" moves with the clock)
        return kept  # type: ignore[return-value]
    counts = dict.fromkeys((ANY_ATTENTION, *ATTENTION), 0)
    others = chosen.narrows and any(
        (chosen.agent, chosen.context, chosen.state, chosen.within, chosen.search)
    )
    first: list[Summary] = []
    rest: list[Summary] = []
    attention, children, state_of = view.attention, view.children, view.state_of
    for s in view.top:
        sid = s.session_id
        if others and not chosen.matches(s, now, previews=previews, state=state_of.get(sid)):
            if sid not in children or not any(
                chosen.matches(one, now, previews=previews, state=state_of.get(one.session_id))
                for _, one in view.family(s)[1:]
            ):
                continue
        reasons = attention.get(sid, ())
        if reasons:
            counts[ANY_ATTENTION] += 1
            for name in reasons:
                counts[name] += 1
        if chosen.wants(reasons):
            (first if reasons else rest).append(s)
    view.picked[key] = picked = (first + rest, counts)
    if len(view.picked) > _KEPT:
        del view.picked[next(iter(view.picked))]
    return picked
