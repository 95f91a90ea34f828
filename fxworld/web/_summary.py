"""The inspector's index of a world's sessions, each folded from its log.

A :class:`~fxworld.engine.summary.Summary` folds a session's entries one at a
time (state, last activity, turns, tokens, the calls waiting for a decision;
the same fold ``fxworld sessions`` uses); :class:`ActivityIndex` keeps one per
session of a world, caught up by :func:`catch_up`, and orders them by last
activity.

Why an index: a world lists its sessions by id (``list_sessions``), and nothing
in the World protocol says which session moved last. So the index reads each
session once, whole, then only what was appended since: one pass over the world
is a ``list_sessions`` call per 500 sessions plus one ``read`` per session (it
asks for the entries from the last one folded on, so an unchanged session costs
one read of one entry, a changed one a read more; a session deleted and written
again is seen, and folded again, because its last folded entry changed). Passes repeat every
``refresh`` seconds, and never take more than half of the time: on a world of
100,000 sessions a pass is 100,000 small reads. Pages are then served from
memory (about 400 bytes per session, and the start of its first prompt) in the
order of last activity; a session appears on the sessions page at the pass after
its first entry.

An empty log's summary is never kept, so probing ids that do not exist leaves
nothing behind. On a world that cannot list its sessions, no pass drops one: the
index keeps the :data:`UNLISTED_KEPT` sessions viewed last.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Final

from fxworld.engine.summary import STATES, State, Summary, nested_state
from fxworld.protocol import SessionLister, WakeLister, World

__all__ = ["UNLISTED_KEPT", "ActivityIndex", "Families", "catch_up"]

logger = logging.getLogger("fxworld.web")

_LIST_PAGE = 500
UNLISTED_KEPT: Final = 1000
"""Summaries kept, the least recently viewed dropped first, on a world that cannot
list its sessions (no pass drops the sessions gone there)."""
_READ_PAGE = 1000
_LIVE = ("waiting", "stuck")  # what a parent shows of its children: what needs a person now


@dataclass
class Families:
    """The sessions as the sessions page lists them: ``top``, the sessions that are
    no known session's child, newest activity first; ``children``, each parent's
    children (newest first); ``attention``, why each session that needs a person
    does (a parent also shows its descendants' ``waiting`` and ``stuck``)."""

    top: list[Summary]
    of: list[Summary] = field(default_factory=list)
    due: dict[str, datetime] = field(default_factory=dict)
    children: dict[str, list[Summary]] = field(default_factory=dict)
    attention: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: why each session itself needs a person; the sessions whose attention time moves
    own: dict[str, tuple[str, ...]] = field(default_factory=dict)
    timed: list[Summary] = field(default_factory=list)
    #: each session's state as the view was built (its timed ones looked at again)
    state_of: dict[str, State] = field(default_factory=dict)
    #: what a filter picked from this view (``fxworld.web._listing.pick``), kept until
    #: the view changes: the pages after the first, and the page's refresh, reuse it
    picked: dict[object, object] = field(default_factory=dict)
    agents: list[str] = field(default_factory=list)
    states: dict[str, int] = field(default_factory=dict)

    def family(self, s: Summary) -> list[tuple[int, Summary]]:
        """``s`` and its descendants, each with its depth, in the order shown."""
        out, stack, seen = [], [(0, s)], set()
        while stack:
            depth, one = stack.pop()
            if one.session_id in seen:
                continue
            seen.add(one.session_id)
            out.append((depth, one))
            kids = self.children.get(one.session_id, [])
            stack.extend((depth + 1, kid) for kid in reversed(kids))
        return out


async def catch_up(world: World, summary: Summary) -> bool:
    """Fold what was appended to the session since ``summary.seq``; ``True`` if
    anything was. A log that no longer holds the last entry folded (deleted,
    then written again) is folded again from its start."""
    if summary.seq:
        head = await world.read(summary.session_id, summary.seq - 1, limit=_READ_PAGE)
        if not head or head[0].seq != summary.seq or head[0].at != summary.last_at:
            fresh = Summary(summary.session_id)
            await catch_up(world, fresh)
            summary.__dict__.update(fresh.__dict__)
            return True
        batch = head[1:]
    else:
        batch = await world.read(summary.session_id, 0, limit=_READ_PAGE)
    changed = bool(batch)
    while batch:  # until an empty read: a world may answer a read in parts
        for e in batch:
            summary.apply(e)
        batch = await world.read(summary.session_id, summary.seq, limit=_READ_PAGE)
    return changed


class ActivityIndex:
    """Every session of a world (a :class:`SessionLister`), newest activity first.

    See the module for what a pass costs. :meth:`ensure_running` starts the
    passes (on the caller's event loop); :meth:`close` stops them.
    """

    def __init__(
        self,
        world: World,
        *,
        refresh: float = 1.0,
        concurrency: int = 16,
        stuck_after: float = 15.0,
    ) -> None:
        self.world = world
        self.refresh = refresh
        self.stuck_after = stuck_after
        #: session id -> due time of its pending wake that no lease holds (last pass)
        self.due: dict[str, datetime] = {}
        self._families: Families | None = None
        self._families_at = 0.0
        self.summaries: dict[str, Summary] = {}
        self.passes = 0
        self.pass_seconds = 0.0
        self._order: list[Summary] | None = None
        self._states: tuple[list[Summary], list[State], dict[str, int]] | None = None
        self._states_at = 0.0
        self._limit = asyncio.Semaphore(concurrency)
        self._task: asyncio.Task[None] | None = None
        self._first = asyncio.Event()

    @property
    def can_list(self) -> bool:
        return isinstance(self.world, SessionLister)

    def ensure_running(self) -> None:
        if self._task is None and self.can_list:
            self._task = asyncio.create_task(self._run(), name="fxworld-inspector-index")

    async def first_pass(self) -> bool:
        """Wait for the first pass (the caller bounds the wait); whether it is done."""
        self.ensure_running()
        if self._task is not None:
            await self._first.wait()
        return self._first.is_set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.refresh_once()
            except Exception:
                logger.exception("inspector: a pass over the sessions failed; trying again")
            self.pass_seconds = time.monotonic() - started
            self._first.set()
            await asyncio.sleep(max(self.refresh, self.pass_seconds))

    async def refresh_once(self) -> None:
        """One pass: every listed session caught up; sessions no longer listed dropped."""
        assert isinstance(self.world, SessionLister)
        listed: set[str] = set()
        after = ""
        while True:
            ids = await self.world.list_sessions(after=after, limit=_LIST_PAGE)
            listed.update(ids)
            changed = await asyncio.gather(*(self.catch_up(sid) for sid in ids))
            if any(changed):
                self._order = None
            if len(ids) < _LIST_PAGE:
                break
            after = ids[-1]
        for gone in set(self.summaries) - listed:
            del self.summaries[gone]
            self._order = None
        await self._read_wakes()
        if self._families is None or self._stale(self._families):
            self._families = self._build(self.ordered())  # here, not in a request
            self._families_at = time.monotonic()
        self.passes += 1

    async def _read_wakes(self) -> None:
        """The due times of the pending wakes no lease holds (a cost in pending wakes)."""
        if not isinstance(self.world, WakeLister):
            return
        due: dict[str, datetime] = {}
        now, after = datetime.now(UTC), ""
        while wakes := await self.world.list_wakes(after=after, limit=_LIST_PAGE):
            for w in wakes:
                if w.leased_until is None or w.leased_until <= now:
                    due[w.session_id] = w.due_at
            if len(wakes) < _LIST_PAGE:
                break
            after = wakes[-1].session_id
        if due != self.due:  # (a new dict: the page's view is built again)
            self.due = due

    def stuck(self, sid: str, now: datetime) -> bool:
        """Whether session ``sid``'s wake was due, and taken by no worker, for longer
        than ``stuck_after`` seconds (as of the last pass)."""
        due = self.due.get(sid)
        return due is not None and now - due > timedelta(seconds=self.stuck_after)

    async def session(self, sid: str) -> Summary:
        """Session ``sid`` caught up now (an empty log's summary has ``seq`` 0 and
        is not kept: probing ids leaves nothing behind)."""
        await self.catch_up(sid)
        return self.summaries.get(sid) or Summary(sid)

    async def nested(self, summary: Summary, depth: int = 3) -> State:
        """``summary``'s state with the child sessions its running turn waits for
        caught up first (``depth`` levels): a child's approval is its parent's too."""
        if depth > 0:
            for child in summary.children.values():
                await self.nested(await self.session(child), depth - 1)
        return nested_state(summary, self.state_of)

    async def catch_up(self, sid: str) -> bool:
        """Catch session ``sid`` up now; ``True`` if it changed."""
        summary = self.summaries.get(sid) or Summary(sid)
        async with self._limit:
            changed = await catch_up(self.world, summary)
        if not summary.seq:
            changed = self.summaries.pop(sid, None) is not None
        elif self.can_list:
            self.summaries[sid] = summary
        else:  # the newest viewed last; the least recently viewed dropped past the bound
            self.summaries.pop(sid, None)
            self.summaries[sid] = summary
            if len(self.summaries) > UNLISTED_KEPT:
                del self.summaries[next(iter(self.summaries))]
        if changed:
            self._order = None
        return changed

    def ordered(self) -> list[Summary]:
        """Every known session, newest activity first (sorted again only after a change)."""
        if self._order is None:
            known = [s for s in self.summaries.values() if s.last_at is not None]
            known.sort(key=lambda s: (s.last_at, s.session_id), reverse=True)
            self._order = known
        return self._order

    def states(self) -> tuple[list[Summary], list[State], dict[str, int]]:
        """:meth:`ordered`, each session's state, and the sessions per state:
        computed again after a change, or a second after (a call's approval timeout
        moves its session on with no entry)."""
        ordered, now = self.ordered(), time.monotonic()
        if self._states is None or self._states[0] is not ordered or now - self._states_at > 1:
            states = [nested_state(s, self.state_of) for s in ordered]
            self._states = (ordered, states, {name: states.count(name) for name in STATES})
            self._states_at = now
        return self._states

    def state_of(self, sid: str) -> State | None:
        """A session's state, a child's approval counted as its parent's too."""
        found = self.summaries.get(sid)
        return None if found is None else nested_state(found, self.state_of)

    def families(self) -> Families:
        """:class:`Families` of the sessions, as of the last pass: built at the end of a
        pass that changed anything (a request builds it only when there is none yet,
        when no pass runs, or while the first pass reads the world); a second after
        the last look, only the sessions whose attention time moves on (a call
        waiting for a decision, whose timeout may pass; a pending wake, which may
        become stuck) are looked at again."""
        view, now = self._families, time.monotonic()
        passing = self._task is not None and self._first.is_set()  # a pass builds it
        if view is None or (not passing and self._stale(view)):
            view = self._families = self._build(self.ordered())
        elif now - self._families_at > 1:
            self._retime(view)
        else:
            return view
        self._families_at = now
        return view

    def _stale(self, view: Families) -> bool:
        return view.of is not self.ordered() or view.due is not self.due

    def update(self, sid: str) -> None:
        """Show what session ``sid`` needs a person for now, at its place in the
        view (a session page, a Clear: before the next pass builds the view again)."""
        view, s = self._families, self.summaries.get(sid)
        if view is None or s is None:
            return
        reasons = self._own(s, datetime.now(UTC))
        self._restate(view, [s])
        for table in (view.own, view.attention):
            if reasons:
                table[sid] = reasons
            else:
                table.pop(sid, None)
        self._propagate(view)
        view.picked.clear()

    def _own(self, s: Summary, at: datetime) -> tuple[str, ...]:
        """Why session ``s`` itself needs a person."""
        reasons = s.attention if s.marks or s.requested else ()
        if self.due and self.stuck(s.session_id, at):
            reasons = (*reasons, "stuck")
        return reasons

    def _build(self, ordered: list[Summary]) -> Families:
        at = datetime.now(UTC)
        known = self.summaries
        view = Families([], of=ordered, due=self.due)
        for s in ordered:
            if s.parent and s.parent in known and s.parent != s.session_id:
                view.children.setdefault(s.parent, []).append(s)
            else:
                view.top.append(s)
            if s.requested or s.session_id in self.due:
                view.timed.append(s)
            reasons = self._own(s, at)
            if reasons:
                view.own[s.session_id] = reasons
        view.attention = dict(view.own)
        self._propagate(view)
        view.agents = sorted({s.agent for s in ordered if s.agent})
        self._restate(view, ordered)
        return view

    def _restate(self, view: Families, changed: Iterable[Summary]) -> None:
        """The states of ``changed`` and of every session that waits for a child
        (a child's approval is its parent's too: :func:`nested_state`), and the
        counts per state of the top rows."""
        for s in [*changed, *(p for p in view.of if p.children)]:
            view.state_of[s.session_id] = nested_state(s, self.state_of)
        states = [view.state_of.get(s.session_id, s.state) for s in view.top]
        view.states = {name: states.count(name) for name in STATES}

    def _retime(self, view: Families) -> None:
        at = datetime.now(UTC)
        self._restate(view, view.timed)
        for s in view.timed:
            reasons = self._own(s, at)
            if reasons:
                view.own[s.session_id] = view.attention[s.session_id] = reasons
            else:
                view.own.pop(s.session_id, None)
                view.attention.pop(s.session_id, None)
        if view.timed:
            self._propagate(view)
            view.picked.clear()

    def _propagate(self, view: Families) -> None:
        """A parent shows what its descendants need a person for now (``_LIVE``)."""
        for parent_id in view.children:
            parent = self.summaries.get(parent_id)
            if parent is None:
                continue
            own = view.own.get(parent_id, ())
            live = {
                name
                for _, kid in view.family(parent)[1:]
                for name in view.own.get(kid.session_id, ())
                if name in _LIVE
            }
            shown = (*own, *sorted(live - set(own)))
            if shown:
                view.attention[parent_id] = shown
            else:
                view.attention.pop(parent_id, None)

    def page(self, offset: int, limit: int) -> list[Summary]:
        return self.ordered()[offset : offset + limit]

    def found(self, ids: Iterable[str]) -> list[Summary]:
        return [self.summaries[sid] for sid in ids if sid in self.summaries]
