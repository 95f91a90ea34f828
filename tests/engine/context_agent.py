"""The agent of test_context.py's worker processes: each session has a tenant, and
the turn's answer is a typed ``Refund``.

``ENGINE_TEST_DIR``: where the tool records each run (``runs.jsonl``: the session,
the tenant it read, the process) and the model each request (``model.jsonl``).
``FXWORLD_TEST_CRASH_AT``: the engine's crash points, and ``in-tool:orders``.

The script: list the tenant's orders (idempotent), answer with text that is not
JSON (refused: the model hears why), then answer a valid ``Refund``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pydantic

from fxworld import Agent, ToolContext, tool
from fxworld.testing import ScriptedModel, crash_point

DIR = Path(os.environ.get("ENGINE_TEST_DIR", "."))


class Tenant(pydantic.BaseModel):
    tenant: str
    user: str


class Refund(pydantic.BaseModel):
    order: str
    cents: int


REFUND = '{"order": "1", "cents": 250}'
SCRIPT = [{"tool": "orders", "input": {}}, "Refund order 1, 250 cents.", REFUND]


@tool(idempotent=True)
def orders(ctx: ToolContext[Tenant]) -> list[str]:
    """The orders of the session's tenant."""
    line = {"session": ctx.session_id, "tenant": ctx.context.tenant, "pid": os.getpid()}
    with open(DIR / "runs.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
    crash_point("in-tool:orders")
    return [f"{ctx.context.tenant}-order-1"]


agent = Agent(
    ScriptedModel(SCRIPT, record_to=DIR / "model.jsonl", delay=0.02),
    tools=[orders],
    instructions="You refund orders.",
    context_type=Tenant,
    output_type=Refund,
    text_chunk_interval=0.0,
)
