# quickstart.py: an agent with two tools on the embedded SQLite world (./.fxworld/),
# and a scripted model: no API key, no server. Run it with: python quickstart.py
import asyncio

from fxworld import Agent, ToolContext, tool
from fxworld.testing import ScriptedModel

ORDERS = {"A-1001": {"item": "blue kettle", "status": "delivered", "paid": 49.0}}


@tool(idempotent=True)  # only reads: after a crash it simply runs again
def get_order(order_id: str) -> dict:
    """Look up an order."""
    return ORDERS[order_id]


@tool  # has an effect: after a crash it never runs again on its own
def refund_order(order_id: str, ctx: ToolContext) -> str:
    """Refund an order."""
    return f"refunded {order_id} (idempotency key {ctx.execution_id})"


# The model's replies, in order: a tool call, another tool call, then the answer.
REPLIES = [
    {"tool": "get_order", "input": {"order_id": "A-1001"}},
    {"tool": "refund_order", "input": {"order_id": "A-1001"}},
    "Order A-1001 (the blue kettle) is refunded: 49.00.",
]
agent = Agent(
    model=ScriptedModel(REPLIES),
    tools=[get_order, refund_order],
    instructions="You help with orders.",
)


async def main() -> None:
    session = agent.session()  # a new session, with a random id
    turn = session.prompt("Please refund order A-1001.")  # saved before anything runs
    worker = asyncio.create_task(agent.work(until_idle=True))  # runs the turn, here
    accepted = await turn.accepted  # the prompt is in the log
    async for event in session.stream(accepted.cursor, until="turn"):
        data = event.data  # the entry kinds and their fields: docs/log-format.md
        detail = data.get("output") or data.get("name") or data.get("text", "")
        print(f"{event.kind:14} {detail}".rstrip())
    await worker  # returns once nothing is left to run
    print("answer:", await turn)


if __name__ == "__main__":  # importable: `fxworld worker quickstart:agent` runs its turns
    asyncio.run(main())
