"""What a queue consumer asks after a run: is the session's work over, and if not,
is a message already on its way for it?

Shared by the wake route (:mod:`fxworld.web`) and the Lambda handler
(:mod:`fxworld.aws`): a message whose session still has work must be delivered
again, unless that work was handed on with a push of its own; one whose session
is over, or waits for a person, must not.

One message per continuation: a turn that yields at the deadline appends
``turn.yielded`` with a wake, and a pushing world sends a message for that wake
once the run hands the session back (:mod:`fxworld.push.world`). That new message
continues the turn, at once; so the delivery that started the run is settled, not
delivered again as well (which would double every continuation's deliveries).
Only work that nothing pushed (a crashed run whose lease has not run out, a
session the deadline left untouched, a push that failed) keeps its delivery.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, Protocol

from fxworld.engine.log import TURN_YIELDED
from fxworld.engine.replay import Idle, WaitForApproval, WaitForChild, next_step
from fxworld.engine.tail import replay_latest_turn
from fxworld.engine.tools import Tool
from fxworld.logends import last_seq
from fxworld.protocol import World
from fxworld.push.world import PushingWorld

__all__ = ["settled", "Handoffs"]

_PAGE = 100
"""Entries read at once while looking for a yield in what a run appended."""


class Consumer(Protocol):
    """What :func:`settled` needs of an agent (an Agent has it)."""

    tools: dict[str, Tool]

    async def ready(self) -> World: ...


async def settled(agent: Consumer, session_id: str) -> Literal["done", "waiting"] | None:
    """``"done"`` when the session runs no turn and no prompt waits (or it is
    empty), ``"waiting"`` when its turn only waits for a person's decision or
    for its child sessions (nothing to run until one comes), else ``None``: work
    is left. Reads only the
    latest turn (:mod:`fxworld.engine.tail`)."""
    state = await replay_latest_turn(await agent.ready(), session_id)
    tools = agent.tools
    idempotent = {name: t.reruns for name, t in tools.items()}
    timeouts = {name: t.approval_timeout for name, t in tools.items() if t.needs_approval}
    step = next_step(state, idempotent, timeouts)
    if isinstance(step, Idle):
        return "done"
    return "waiting" if isinstance(step, WaitForApproval | WaitForChild) else None


class Handoffs:
    """Which of the named sessions a run handed on with a push: make one before
    the run (``await Handoffs.before(agent, session_ids)``: it notes where each
    log ends), ask :meth:`pushed` after it."""

    def __init__(self, world: World, failed: int | None, ends: dict[str, int]) -> None:
        self.world = world
        self._failed = failed
        self._ends = ends

    @classmethod
    async def before(cls, agent: Consumer, session_ids: Iterable[str]) -> Handoffs:
        world = await agent.ready()
        if not isinstance(world, PushingWorld):  # nothing is pushed: nothing handed on
            return cls(world, None, {})
        ends = {sid: await last_seq(world, sid) for sid in set(session_ids)}
        return cls(world, world.stats.failed, ends)

    async def pushed(self, session_id: str) -> bool:
        """Whether the session's work left goes on through a message already sent:
        a ``turn.yielded`` was appended since :meth:`before` (a yield makes a wake
        durable, and the world pushes every such wake), and no push failed
        meanwhile (then the queue's own redelivery is kept, rather than wait for
        the tick). The log is read from where it ended, not at its end: the pushed
        message may already have started the next run."""
        world = self.world
        after = self._ends.get(session_id)
        if after is None or not isinstance(world, PushingWorld):
            return False
        if world.stats.failed != self._failed:
            return False
        while page := await world.read(session_id, after, limit=_PAGE):
            if any(e.kind == TURN_YIELDED for e in page):
                return True
            after = page[-1].seq
        return False
