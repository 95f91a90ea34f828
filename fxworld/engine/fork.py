"""Forking a session: a new session whose log starts as the source's did, up to a
turn boundary.

The fork's log is one atomic append (W4), so a fork is whole or absent: its first
entry is ``forked`` (``{"source", "at", "cursor", "entries", "context"?}``: the
source's context, if it has one), then a copy of
each entry of the source up to ``at``, except:

- ``fence`` entries (the world writes them on a takeover of the source; callers
  cannot append them, and the replay skips them anyway), and a ``forked`` entry
  of the source (the new one names its direct source);
- prompts no turn had started to answer by ``at``, and their ``stop.requested``:
  they belong to the source's later turns, so the fork starts idle.

Positions therefore move: the ``prompt`` field of the turn entries and of
``stop.requested`` is rewritten to the prompt's seq in the fork. Copied entries
are unfenced (``epoch`` ``None``) and keep their data otherwise, execution ids
included: every copied call is resolved (its turn ended), so none runs again in
the fork, and a decision on one stands as in the source. New calls in the
fork get new execution ids.

The source is only read. ``at`` must be a turn boundary: a position after which
no turn is in progress. A cursor inside a turn raises ``InvalidArgument`` naming
the boundaries before and after it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from fxworld import validate
from fxworld.errors import Conflict, InvalidArgument, UnknownSession
from fxworld.protocol import World
from fxworld.types import Entry, NewEntry

from . import log
from .cursor import decode_cursor, encode_cursor
from .replay import Replay, agent_path

__all__ = ["fork_session"]

_PROMPT_REFS = frozenset({log.TURN_STARTED, log.TURN_YIELDED, log.STOP_REQUESTED}) | (
    log.TURN_END_KINDS
)
"""The kinds whose ``prompt`` field is the seq of a prompt in the same log."""


@dataclass
class Boundaries:
    """The source's entries, read up to ``at`` (or to its end), and where its turn
    boundaries are."""

    entries: list[Entry]
    answered: set[int]
    """The prompts whose turn had ended by ``at`` (at a boundary, every turn
    started by then had ended)."""
    last_end: int = 0
    """The seq of the last entry that ended a turn (0: none)."""
    before: int = 0
    """The last boundary at or before the end of :attr:`entries` (0: the start)."""
    after: int | None = None
    """The first boundary after it, if the log has one."""


async def _scan(world: World, sid: str, at: int | None) -> Boundaries:
    """Read the source up to ``at`` (the whole log when ``None``), replaying it;
    when ``at`` falls inside a turn, read on to the next boundary."""
    state = Replay()
    seen: list[Entry] = []
    scan = Boundaries(seen, state.answered)
    after = 0
    while batch := await world.read(sid, after, limit=1000):
        for e in batch:
            state.apply(e)
            idle = state.current is None
            if at is None or e.seq <= at:
                seen.append(e)
                if e.seq == at:  # the prompts answered by then, not by later turns
                    scan.answered = set(state.answered)
                if idle:
                    scan.before = e.seq
                    if e.kind in log.TURN_END_KINDS:
                        scan.last_end = e.seq
            elif idle:
                scan.after = e.seq
                return scan
        after = batch[-1].seq
        if at is not None and after >= at and scan.before == at:
            return scan
    return scan


def _copies(source: list[Entry], upto: int, answered: set[int]) -> list[NewEntry]:
    """The entries of ``source`` up to ``upto`` that the fork holds, their
    ``prompt`` references moved to the fork's positions (its seq 1 is ``forked``)."""
    moved: dict[int, int] = {}
    out: list[NewEntry] = []
    for e in source:
        if e.seq > upto or e.kind in (log.FENCE, log.FORKED):
            continue
        if e.kind == log.PROMPT and e.seq not in answered:
            continue
        data = dict(e.data)
        if e.kind in _PROMPT_REFS:
            prompt = data.get("prompt")
            if e.kind == log.STOP_REQUESTED and prompt not in answered:
                continue
            if isinstance(prompt, int) and prompt in moved:
                data["prompt"] = moved[prompt]
        if e.kind == log.PROMPT:
            moved[e.seq] = len(out) + 2
        out.append(NewEntry(e.kind, data))
    return out


async def fork_session(
    world: World,
    source: str,
    *,
    at: str | None = None,
    target: str | None = None,
    agent: str | None = None,
) -> str:
    """Fork session ``source`` at cursor ``at`` (``None``: the end of its last
    finished turn) into session ``target`` (``None``: a new random id); returns
    the target's id. See the module for what the fork holds. ``agent``: the agent
    that makes the fork, named in its ``forked`` entry (its owner).

    Raises :class:`~fxworld.errors.UnknownSession` when ``source`` has no log,
    ``InvalidCursor`` for a cursor not issued for ``source``,
    :class:`~fxworld.errors.InvalidArgument` for a cursor inside a turn or past
    the end of the log (or a target equal to the source), and
    :class:`~fxworld.errors.Conflict` when ``target`` already holds entries
    (unless it is this very fork, repeated: a retry returns it). Nothing is
    written unless the fork is made whole.
    """
    sid = validate.session_id(source)
    new = validate.session_id(target) if target is not None else f"s-{uuid.uuid4().hex}"
    if new == sid:
        raise InvalidArgument(f"a fork needs an id other than its source's ({sid!r})")
    wanted = decode_cursor(sid, at) if at is not None else None
    scan = await _scan(world, sid, wanted)
    if not scan.entries and not await world.read(sid, 0, limit=1):
        raise UnknownSession(sid)
    point = scan.last_end if wanted is None else _checked(sid, wanted, scan)
    copies = _copies(scan.entries, point, scan.answered)
    context = scan.entries[0].data.get("context") if scan.entries else None
    kept: dict[str, Any] = {"context": context} if isinstance(context, dict) else {}
    agents = agent_path(scan.entries[0]) if scan.entries else ()
    if agents:  # a fork of a child session runs with the child's agent, as its source
        kept["agents"] = list(agents)
    if agent is not None:
        kept["agent"] = agent
    forked = log.entry(
        log.FORKED,
        source=sid,
        at=point,
        cursor=encode_cursor(sid, point),
        entries=len(copies),
        **kept,
    )
    key = f"fork:{sid}:{point}"
    seq = await world.append(new, [forked, *copies], expect=0, key=key)
    await _check_landed(world, new, seq, forked)
    return new


def _checked(sid: str, wanted: int, scan: Boundaries) -> int:
    last = scan.entries[-1].seq if scan.entries else 0
    if wanted > last:
        raise InvalidArgument(
            f"session {sid!r}: the cursor stands at seq {wanted}, past the end of its log"
            f" (seq {last})"
        )
    if scan.before != wanted:

        def name(n: int) -> str:
            return f"seq {n} (cursor {encode_cursor(sid, n)})"

        after = f" and {name(scan.after)}" if scan.after is not None else ""
        raise InvalidArgument(
            f"session {sid!r}: seq {wanted} is inside a turn; the nearest turn boundaries "
            f"are {name(scan.before)}{after}"
        )
    return wanted


async def _check_landed(world: World, new: str, seq: int, forked: NewEntry) -> None:
    """A keyed repeat returns the seq its first call landed at (W6): make sure
    that call was this fork (the target may have held another one)."""
    first = await world.read(new, 0, limit=1)
    if seq == 1 + int(forked.data["entries"]) and first and first[0].data == forked.data:
        return
    raise Conflict(new, 0, seq)
