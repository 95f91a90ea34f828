"""The agents of test_agent_routing.py's worker processes: two agents that share one
world (``support`` and ``sales``), and a desk whose agent tool is a researcher of
another name. Each answers with its own name, so a test sees who answered.

    python routing_agents.py WORLD_URL AGENT [--own-only]

runs ``AGENT``'s worker on the world until SIGTERM (``--own-only``:
``work(agent_tools=False)``, so a desk leaves its children to the researcher's worker).
"""

from __future__ import annotations

import asyncio
import logging
import sys

from fxworld import Agent, open_world
from fxworld.testing import ScriptedModel

support = Agent(ScriptedModel(["support answers"]), name="support")
sales = Agent(ScriptedModel(["sales answers"]), name="sales")
researcher = Agent(ScriptedModel(["researcher found 3 May"]), name="researcher")
desk = Agent(
    ScriptedModel([{"tool": "research", "input": {"input": "When?"}}, "desk says 3 May"]),
    tools=[researcher.as_tool(name="research")],
    name="desk",
)
AGENTS = {a.name: a for a in (support, sales, researcher, desk)}


async def _main(url: str, name: str, own_only: bool) -> None:
    world = open_world(url)
    agent = AGENTS[name]
    serving = Agent(agent.model, tools=list(agent.tools.values()), world=world, name=agent.name)
    print(f"serving {name}", flush=True)
    try:
        await serving.work(handle_signals=True, agent_tools=not own_only, poll_interval=0.05)
    finally:
        await world.close()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    asyncio.run(_main(sys.argv[1], sys.argv[2], "--own-only" in sys.argv[3:]))
