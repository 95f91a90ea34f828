"""What a session's page reads besides its summary: the newest turns of its log
(a page, however long the log), the number of turns before them, and the
approvals its child sessions wait for.

**Pages of turns.** A page shows the newest ``turns`` turns before a seq, read
from the log's end backwards in growing pages (:func:`fxworld.logends.backwards`),
from just after the end of the turn before them (so a turn's prompt and the
fence that took it up are on the page), and never more than ``cap`` entries: a
session of 10,000 entries opens reading only its last turns. The page before is
a link with ``before=<its first seq>`` and ``turns=<the turns started before
it>``, so the turns keep their numbers (1 for the session's first) without a
read of the log's start.

**A child's approval, in its parent.** The calls of a parent's running turn that
wait for their child sessions (``child.started``, no result yet) are followed, to
a depth of :data:`CHILD_DEPTH`, to the calls that wait for a decision there
(:func:`fxworld.engine.approvals.pending_approvals`): the parent's page shows each
with its input, and its Approve and Deny decide the child's call (the request
goes to the child's route, so ``authorize`` is asked for the child).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fxworld.engine import decode_cursor, log
from fxworld.engine.approvals import Approval, pending_approvals
from fxworld.engine.tail import replay_latest_turn
from fxworld.logends import backwards
from fxworld.protocol import World
from fxworld.types import Entry

from ._html import Shown, esc, session_link, value_html
from ._timeline import decide_box
from ._values import pointer

__all__ = [
    "CHILD_DEPTH",
    "ChildApproval",
    "newest_turns",
    "turns_between",
    "child_approvals",
    "waiting_html",
]

CHILD_DEPTH = 3
"""How deep a parent's page looks for its children's approvals (a child, its child...)."""


async def newest_turns(world: World, sid: str, upto: int, *, turns: int, cap: int) -> list[Entry]:
    """The entries of the newest ``turns`` turns with ``seq <= upto`` and what
    followed them, from just after the end of the turn before; at most ``cap``
    entries (the newest)."""
    got: list[Entry] = []
    seen = 0
    async for e in backwards(world, sid, upto):
        if e.kind in log.TURN_END_KINDS and seen >= turns:
            break
        got.append(e)
        seen += e.kind == log.TURN_STARTED
        if len(got) >= cap:
            break
    got.reverse()
    return got


async def turns_between(world: World, sid: str, after: int, upto: int) -> int:
    """The turns started at seqs ``after < seq <= upto``, counted page by page."""
    count = 0
    while after < upto:
        batch = await world.read(sid, after, limit=min(1000, upto - after))
        if not batch:
            break
        count += sum(1 for e in batch if e.kind == log.TURN_STARTED and e.seq <= upto)
        after = batch[-1].seq
    return count


@dataclass(frozen=True)
class ChildApproval:
    """A call waiting for a decision in a child session (``via``: the sessions from
    the parent's child down to the one that waits; ``tool``: the parent's call)."""

    via: tuple[str, ...]
    tool: str
    approval: Approval

    @property
    def session_id(self) -> str:
        return self.via[-1]

    @property
    def seq(self) -> int:
        """The seq of its ``approval.requested`` in the child's log."""
        return decode_cursor(self.session_id, self.approval.cursor)


async def child_approvals(
    world: World, sid: str, depth: int = CHILD_DEPTH, via: tuple[str, ...] = (), tool: str = ""
) -> list[ChildApproval]:
    """The calls waiting for a decision in the child sessions session ``sid``'s
    running turn waits for (and in theirs, to ``depth``)."""
    if depth < 1:
        return []
    cur = (await replay_latest_turn(world, sid)).current
    if cur is None or cur.stop:
        return []
    found: list[ChildApproval] = []
    for c in cur.calls:
        if c.child is None or c.resolved:
            continue
        path = (*via, c.child)
        for a in await pending_approvals(world, c.child):
            found.append(ChildApproval(path, tool or c.name, a))
        found += await child_approvals(world, c.child, depth - 1, path, tool or c.name)
    return found


def waiting_html(
    sid: str, own: Sequence[Shown], children: Sequence[tuple[ChildApproval, Shown]]
) -> str:
    """The boxes of the calls that wait for a decision: this session's (``own``:
    their ``approval.requested`` entries, as this viewer may see them) and its
    children's (with the child's entry, as this viewer may see it), each with
    the input it would approve."""
    boxes = []
    for e in own:
        eid = str(e.data.get("execution_id"))
        label = (
            f"<b>{esc(e.data.get('name'))}</b> <code>{esc(eid)}</code> waits for a decision;"
            f' the input to approve:<div class="input">'
            f"{value_html(e.data.get('input'), sid, e.seq, pointer('input'))}</div>"
        )
        boxes.append(decide_box(eid, label))
    for c, e in children:
        chain = " → ".join(session_link(s, "child") for s in c.via)
        eid = str(e.data.get("execution_id"))
        label = (
            f'<div class="from-child">in the child session {chain} (this session\'s call of'
            f" <b>{esc(c.tool)}</b>): deciding here decides the child's call</div>"
            f"<b>{esc(e.data.get('name'))}</b> <code>{esc(eid)}</code> waits for a decision;"
            f' the input to approve:<div class="input">'
            f"{value_html(e.data.get('input'), c.session_id, e.seq, pointer('input'))}</div>"
        )
        boxes.append(decide_box(eid, label, session_id=c.session_id))
    return "".join(boxes)
