"""Which sessions a person asks for: :class:`SessionFilter`, one for the inspector's
sessions page and ``fxworld sessions list``.

A filter keeps the sessions that need attention (any, or one reason of
:data:`~fxworld.engine.summary.ATTENTION`), of an agent, whose context holds
``key=value`` (each pair given), in a state, active within a duration, and whose id
or first prompt holds a text (anywhere, any case). Everything given must hold.
Made by :meth:`SessionFilter.make`, which checks each part and raises
:class:`~fxworld.errors.InvalidArgument` with what is expected.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from fxworld.errors import InvalidArgument

from .summary import ATTENTION, STATES, Summary, context_matches

__all__ = ["ANY_ATTENTION", "SessionFilter", "context_pair"]

ANY_ATTENTION = "any"
"""The attention filter that keeps a session needing a person for any reason."""
_MAX_TEXT = 200


def context_pair(text: str) -> tuple[str, str]:
    """``"tenant=acme"`` as ``("tenant", "acme")``; anything without a key and ``=``
    raises :class:`~fxworld.errors.InvalidArgument`."""
    key, eq, value = text.partition("=")
    if not eq or not key.strip() or len(text) > _MAX_TEXT:
        raise InvalidArgument("a context filter is key=value, like tenant=acme")
    return key.strip(), value


@dataclass(frozen=True)
class SessionFilter:
    """What a session must be to be listed (see the module); empty keeps all."""

    attention: str = ""
    agent: str = ""
    context: tuple[tuple[str, str], ...] = ()
    state: str = ""
    active: str = ""
    within: timedelta | None = None
    search: str = ""

    @classmethod
    def make(
        cls,
        *,
        attention: str | None = None,
        agent: str | None = None,
        context: Iterable[str] = (),
        state: str | None = None,
        active: str | None = None,
        search: str | None = None,
    ) -> SessionFilter:
        """A filter of the parts given (``None`` or ``""``: not asked); a bad part
        raises ``InvalidArgument`` before anything is read."""
        attention = (attention or "").strip()
        if attention and attention != ANY_ATTENTION and attention not in ATTENTION:
            names = ", ".join((ANY_ATTENTION, *ATTENTION))
            raise InvalidArgument(f"attention is one of {names}")
        state = state or ""
        if state and state not in STATES:
            raise InvalidArgument(f"state is one of {', '.join(STATES)}")
        within = None
        if active:
            from .retention import parse_duration

            try:
                within = parse_duration(active)
            except InvalidArgument:
                raise InvalidArgument(
                    "active is a duration: a number and a unit (s, m, h, d, w), like 24h or 7d"
                ) from None
        texts = {"agent": agent or "", "search": (search or "").strip()}
        for name, text in texts.items():
            if len(text) > _MAX_TEXT:
                raise InvalidArgument(f"{name} is at most {_MAX_TEXT} characters")
        pairs = tuple(context_pair(c) for c in context if c)
        return cls(attention, texts["agent"], pairs, state, active or "", within, texts["search"])

    @property
    def narrows(self) -> bool:
        """Whether it leaves out anything."""
        return bool(
            self.attention or self.agent or self.context or self.state or self.within or self.search
        )

    def wants(self, attention: Collection[str]) -> bool:
        """Whether a session that needs a person for ``attention`` passes the attention part."""
        if not self.attention:
            return True
        return bool(attention) if self.attention == ANY_ATTENTION else self.attention in attention

    def matches(
        self, s: Summary, now: datetime, *, previews: bool = True, state: str | None = None
    ) -> bool:
        """Whether session ``s`` passes every part but attention (``previews``:
        search its first prompt too, not only its id; ``state``: its state, when
        the caller knows it already)."""
        if self.agent and (s.agent or "-") != self.agent:
            return False
        for k, v in self.context:
            if not context_matches(s.context, k, v):
                return False
        if self.state and (state or s.state) != self.state:
            return False
        if self.within is not None and (s.last_at is None or now - s.last_at > self.within):
            return False
        if self.search:
            needle = self.search.casefold()
            if needle not in s.session_id.casefold() and not (
                previews and needle in s.preview.casefold()
            ):
                return False
        return True
