"""The agents of test_subagents.py's worker processes: a desk agent whose tool
``research`` is the researcher agent (``researcher.as_tool()``).

``ENGINE_TEST_DIR``: where the researcher's tool records each run (``runs.jsonl``:
the session, the tenant it read, the attempt, the process) and each model each
request (``desk.jsonl``, ``researcher.jsonl``). ``FXWORLD_TEST_CRASH_AT``: the
engine's crash points, and ``in-tool:search`` (inside the child's turn).
``ENGINE_TEST_OTEL=1``: OpenTelemetry's SDK as the global providers (:mod:`otel_setup`).
``TEAM_HOLD_SEARCH=1``: the search waits (at most 30 s) until ``ENGINE_TEST_DIR/release``
exists, so a test can hold the child's turn while it looks at the parent.

The desk asks the researcher; the researcher searches (idempotent), then answers;
the desk answers.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

if os.environ.get("ENGINE_TEST_OTEL") == "1":
    import otel_setup  # noqa: F401 (sets the global providers, before any run)

from fxworld import Agent, ToolContext, tool
from fxworld.testing import ScriptedModel, crash_point

DIR = Path(os.environ.get("ENGINE_TEST_DIR", "."))
TASK = "Find the shipping date of order A."
FOUND = "Order A ships on 3 May."
FINAL = "Your order ships on 3 May."


@tool(idempotent=True)
def search(query: str, ctx: ToolContext) -> str:
    """Search the order system."""
    line = {
        "session": ctx.session_id,
        "tenant": ctx.context.get("tenant"),
        "attempt": ctx.attempt,
        "pid": os.getpid(),
    }
    with open(DIR / "runs.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
    crash_point("in-tool:search")
    if os.environ.get("TEAM_HOLD_SEARCH") == "1":
        end = time.monotonic() + 30
        while not (DIR / "release").exists() and time.monotonic() < end:
            time.sleep(0.02)
    return f"{query}: ships 3 May"


researcher = Agent(
    ScriptedModel(
        [{"tool": "search", "input": {"query": "order A"}}, FOUND],
        record_to=DIR / "researcher.jsonl",
        delay=0.01,
    ),
    tools=[search],
    instructions="You find facts.",
    name="researcher",
)

agent = Agent(
    ScriptedModel(
        [{"tool": "research", "input": {"input": TASK}}, FINAL],
        record_to=DIR / "desk.jsonl",
        delay=0.01,
    ),
    tools=[researcher.as_tool(name="research", description="Ask the researcher.")],
    instructions="You answer customers.",
    name="desk",
)
