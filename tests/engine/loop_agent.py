"""The agent of test_limits.py's worker processes: its model calls ``look`` again
and again, and a turn may make 4 model calls (``max_model_calls=4``)."""

from __future__ import annotations

from fxworld import Agent, tool
from fxworld.testing import ScriptedModel

LIMIT = 4


@tool(idempotent=True)
def look() -> str:
    """Look once more."""
    return "nothing found yet"


agent = Agent(
    ScriptedModel([{"tool": "look", "input": {}}] * 20), tools=[look], max_model_calls=LIMIT
)
