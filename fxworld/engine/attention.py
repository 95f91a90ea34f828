"""A person clears what a session's ended turns need: :func:`clear_attention`.

A session whose turn failed, stopped, or ended with a tool error or something cut
keeps that mark (:attr:`fxworld.engine.summary.Summary.attention`) turn after turn,
until a turn ends clean or a person clears it: an ``attention.cleared`` entry, with
who cleared it (its ``actor``, as a decision's) and an optional note. A call waiting
for a decision is not cleared so: it is decided.
"""

from __future__ import annotations

from fxworld import validate
from fxworld.errors import InvalidArgument
from fxworld.protocol import World

from . import log
from .approvals import check_actor

__all__ = ["MAX_NOTE_CHARS", "clear_attention", "clear_key"]

MAX_NOTE_CHARS = 2000
"""The longest note a clear keeps, in characters."""


def clear_key(upto: int) -> str:
    """The idempotency key of the clear of a log that stood at seq ``upto``."""
    return f"clear:{upto}"


async def clear_attention(
    world: World, session_id: str, *, upto: int, note: str | None = None, actor: str | None = None
) -> int:
    """Append ``attention.cleared`` to session ``session_id``, whose log stood at seq
    ``upto`` when the person looked; the seq it landed at. Keyed ``clear:<upto>``:
    a second clear of the same look writes nothing. ``actor``: who (``"local"``
    when ``None``). Bad input raises :class:`~fxworld.errors.InvalidArgument` (or
    ``InvalidSessionId``) before any I/O."""
    sid = validate.session_id(session_id)
    if isinstance(upto, bool) or not isinstance(upto, int) or upto < 1:
        raise InvalidArgument("upto must be the seq the log stood at, from 1")
    if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE_CHARS):
        raise InvalidArgument(f"note must be a str of at most {MAX_NOTE_CHARS} characters")
    who = check_actor(actor)
    data: dict[str, object] = {"upto": upto, "actor": who}
    if note:
        data["note"] = note
    return await world.append(sid, [log.entry(log.ATTENTION_CLEARED, **data)], key=clear_key(upto))
