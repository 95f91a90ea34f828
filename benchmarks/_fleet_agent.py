"""The agent benchmarks/bench_fleet.py runs in its worker processes: each turn is
``FLEET_STEPS`` tool steps (a no-op tool; the scripted model answers at once), then a
final answer, so a worker's time goes to the engine and the world, not to waiting."""

import os

from fxworld import Agent, tool
from fxworld.testing import ScriptedModel

STEPS = int(os.environ.get("FLEET_STEPS", "10"))


@tool(idempotent=True)
async def noop() -> str:
    return "ok"


agent = Agent(ScriptedModel([{"tool": "noop"} for _ in range(STEPS)] + ["done"]), tools=[noop])
