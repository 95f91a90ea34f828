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

The run says how it ended (``WorkResult.ended``): the consumer reads nothing
after it for a session it ran. Only a session the run did not take (another
worker holds it, the deadline came first, its work was over already) is looked
at in the log: its latest turn, replayed (:mod:`fxworld.engine.tail`).
"""

from __future__ import annotations

from typing import Protocol

from fxworld.engine.agent import WorkResult
from fxworld.engine.replay import RunEnd, end_of, next_step
from fxworld.engine.tail import replay_latest_turn
from fxworld.engine.tools import Tool
from fxworld.protocol import World

__all__ = ["ended"]


class Consumer(Protocol):
    """What :func:`ended` needs of an agent (an Agent has it)."""

    tools: dict[str, Tool]

    async def ready(self) -> World: ...


async def ended(agent: Consumer, worked: WorkResult, session_id: str) -> RunEnd:
    """How session ``session_id`` ended: as the run that ``worked`` reports said,
    when it ran the session; else, from its latest turn, ``"done"`` (no turn runs
    and no prompt waits, or it is empty), ``"waiting"`` (its turn only waits for a
    person's decision or for its child sessions) or ``"pending"`` (work is left)."""
    said = worked.ended.get(session_id)
    if said is not None:
        return said
    state = await replay_latest_turn(await agent.ready(), session_id)
    tools = agent.tools
    idempotent = {name: t.reruns for name, t in tools.items()}
    timeouts = {name: t.approval_timeout for name, t in tools.items() if t.needs_approval}
    return end_of(next_step(state, idempotent, timeouts))
