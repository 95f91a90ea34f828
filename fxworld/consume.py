"""What a queue consumer asks after a run: is the session's work over?

Shared by the wake route (:mod:`fxworld.web`) and the Lambda handler
(:mod:`fxworld.aws`): a message whose session still has work must be delivered
again; one whose session is over, or waits for a person, must not.
"""

from __future__ import annotations

from typing import Literal, Protocol

from fxworld.engine.replay import Idle, WaitForApproval, WaitForChild, next_step
from fxworld.engine.tail import replay_latest_turn
from fxworld.engine.tools import Tool
from fxworld.protocol import World

__all__ = ["settled"]


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
