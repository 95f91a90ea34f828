"""What a queue consumer answers for a message after a run: how the session it
names ended (:data:`~fxworld.engine.replay.RunEnd`).

Shared by the wake route (:mod:`fxworld.web`) and the Lambda handler
(:mod:`fxworld.aws`): a message whose session still has work must be delivered
again, unless that work was handed on with a push of its own; one whose session
is over, or waits for a person or for its child sessions, must not.

One message per continuation: a turn that yields at the deadline appends
``turn.yielded`` with a wake, and a pushing world sends a message for that wake
once the run hands the session back (:mod:`fxworld.push.world`). That new message
continues the turn, at once; so the delivery that started the run is settled, not
delivered again as well (which would double every continuation's deliveries).
Only work that nothing pushed (a crashed run whose lease has not run out, a
session the deadline left untouched, a push that failed) keeps its delivery.

The run says how it ended (``WorkResult.ended``): for a session it ran, the
consumer reads nothing after it. A session the run did not take (another worker
held it, the deadline came first, its work was over already) is looked at in the
log: its latest turn, replayed (:mod:`fxworld.engine.tail`); and, on a pushing
world, whether another worker's run yielded it meanwhile (then that yield's own
message continues it), which is why :meth:`Handoffs.before` notes where each named
log ends before the run: one call per session (``last_entry``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from fxworld.engine.agent import Agent, WorkResult
from fxworld.engine.log import TURN_YIELDED
from fxworld.engine.replay import RunEnd, end_of, next_step
from fxworld.engine.tail import replay_latest_turn
from fxworld.engine.tools import Tool
from fxworld.errors import ConfigurationError
from fxworld.logends import last_seq
from fxworld.protocol import World
from fxworld.push.world import PushingWorld
from fxworld.types import Entry

__all__ = ["Handoffs", "served", "work_all"]


def served(agent: Agent | Sequence[Agent]) -> dict[str, Agent]:
    """The agents a consumer (the wake route, ``lambda_handler``) serves, by name:
    one, or several sharing a queue (W19). Two of one name: ``ConfigurationError``."""
    agents = [agent] if not isinstance(agent, Sequence) else list(agent)
    if not agents:
        raise ConfigurationError("a queue consumer needs at least one agent")
    by_name: dict[str, Agent] = {}
    for a in agents:
        if a.name in by_name:
            raise ConfigurationError(f"two agents are named {a.name!r}: each needs its own name")
        by_name[a.name] = a
    return by_name


async def work_all(agents: Sequence[Agent], **options: Any) -> WorkResult:
    """``agent.work(**options)`` of each agent at once (each takes only its own
    sessions' wakes, W19), as one result: the deadline hit if any hit it, and how
    every session any of them ran ended."""
    results = await asyncio.gather(*(a.work(**options) for a in agents))
    ended: Mapping[str, Any] = {k: v for r in results for k, v in r.ended.items()}
    return WorkResult(hit_deadline=any(r.hit_deadline for r in results), ended=ended)


class Consumer(Protocol):
    """What :class:`Handoffs` needs of an agent (an Agent has it)."""

    tools: dict[str, Tool]

    async def ready(self) -> World: ...


class Handoffs:
    """How the named sessions ended: make one before the run (``await
    Handoffs.before(agent, session_ids)``), ask :meth:`ended` after it."""

    def __init__(self, agent: Consumer, world: World, ends: dict[str, int]) -> None:
        self.agent = agent
        self.world = world
        self._ends = ends

    @classmethod
    async def before(cls, agent: Consumer, session_ids: Iterable[str]) -> Handoffs:
        """Notes where each named log ends, on a pushing world (elsewhere nothing is
        pushed, so nothing is handed on)."""
        world = await agent.ready()
        if not isinstance(world, PushingWorld):
            return cls(agent, world, {})
        return cls(agent, world, {sid: await last_seq(world, sid) for sid in set(session_ids)})

    async def ended(self, worked: WorkResult, session_id: str) -> RunEnd:
        """How session ``session_id`` ended: as ``worked`` (what ``agent.work()``
        returned) says, when the run took it, with no read. Else from its latest
        turn: ``"done"`` (no turn runs and no prompt waits, or it is empty),
        ``"waiting"`` (its turn only waits for a person's decision or for its
        child sessions), ``"yielded"`` (work is left, and a ``turn.yielded``
        landed since :meth:`before`: that yield's push continues it) or
        ``"pending"``."""
        said = worked.ended.get(session_id)
        if said is not None:
            return said
        after = self._ends.get(session_id)
        yielded = False

        def watch(e: Entry) -> None:
            nonlocal yielded
            yielded = yielded or (after is not None and e.seq > after and e.kind == TURN_YIELDED)

        state = await replay_latest_turn(self.world, session_id, watch=watch)
        tools = self.agent.tools
        idempotent = {name: t.reruns for name, t in tools.items()}
        timeouts = {name: t.approval_timeout for name, t in tools.items() if t.needs_approval}
        end = end_of(next_step(state, idempotent, timeouts))
        return "yielded" if end == "pending" and yielded else end
