"""The chat example's agent: an order assistant that runs without any API key.

Its model is :class:`fxworld.testing.ScriptedModel`, which plays a fixed script
(the same answer to the same conversation in any process), so the page shows real
streamed text and real tool calls, saved step by step, with nothing to configure.
Swap in ``model="anthropic/claude-opus-5.5"`` (or any model string) for the real thing.

Serve it with the page (from the repository's root)::

    fxworld serve examples/chat/agent.py:agent --static examples/chat/static --allow-anyone

``FXWORLD_CHAT_DELAY`` (seconds, default 0.08) paces the streamed text, and
``FXWORLD_CHAT_TOOL_DELAY`` (default 1.0) how long a tool call takes, so that
there is time to watch, or to kill the server in the middle of a turn.
"""

from __future__ import annotations

import asyncio
import os

from fxworld import Agent, ToolContext, tool
from fxworld.testing import ScriptedModel

PIECE_DELAY = float(os.environ.get("FXWORLD_CHAT_DELAY", "0.08"))
TOOL_DELAY = float(os.environ.get("FXWORLD_CHAT_TOOL_DELAY", "1.0"))

ORDERS = {
    "A-1": {"id": "A-1", "item": "blue kettle", "status": "shipped", "eta": "Thursday"},
    "A-2": {"id": "A-2", "item": "tea cups (4)", "status": "processing", "eta": "next week"},
}


@tool(idempotent=True)
async def get_order(id: str) -> dict[str, str]:
    """Look up an order by its id."""
    await asyncio.sleep(TOOL_DELAY)  # a slow backend
    return ORDERS.get(id, {"id": id, "status": "unknown"})


@tool(needs_approval=True)
async def refund_order(id: str, ctx: ToolContext) -> dict[str, str]:
    """Refund an order. Waits for a person's approval (the page shows Approve /
    Deny), and is not idempotent: after a crash it is not run again on its own."""
    await asyncio.sleep(TOOL_DELAY)
    # A real payment service would take ctx.execution_id as its idempotency key.
    return {"id": id, "refund": "issued", "idempotency_key": ctx.execution_id}


SCRIPT = [
    {"tool": "get_order", "input": {"id": "A-1"}},
    "Your order A-1, the blue kettle, shipped yesterday and should arrive on Thursday. "
    "Every step of this answer was saved as it happened: kill the server now and "
    "restart it, and this reply continues where it stopped.",
    {"tool": "refund_order", "input": {"id": "A-1"}},
    "Done: the refund for order A-1 is issued. The refund call carried its execution id, "
    "so a payment service would never refund twice, even if this turn were replayed.",
] + [
    "This demo runs on a scripted model (fxworld.testing.ScriptedModel), so it can only "
    "follow its script. Press New to start over, or serve your own agent."
] * 50

agent = Agent(
    model=ScriptedModel(SCRIPT, pieces=24, delay=PIECE_DELAY),
    tools=[get_order, refund_order],
    instructions="You are an order assistant. Look orders up before answering.",
)
