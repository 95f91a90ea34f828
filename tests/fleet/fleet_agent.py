"""The agent of tests/fleet/test_rolling_deploy.py's workers: turns of ``STEPS``
tool steps; the tool is not idempotent, takes ``PAUSE`` seconds, and records each
run (its execution_id and the worker's pid) in ``$FLEET_RUNS`` (JSON lines), so a
test sees any call that ran twice."""

from __future__ import annotations

import asyncio
import json
import os

from fxworld import Agent, ToolContext, tool
from fxworld.testing import ScriptedModel

STEPS = 8
PAUSE = 0.15


def _record(execution_id: str) -> None:
    with open(os.environ["FLEET_RUNS"], "a") as out:
        out.write(json.dumps({"execution_id": execution_id, "pid": os.getpid()}) + "\n")


@tool
async def work(ctx: ToolContext) -> str:
    _record(ctx.execution_id)
    await asyncio.sleep(PAUSE)
    return "ok"


agent = Agent(ScriptedModel([{"tool": "work"} for _ in range(STEPS)] + ["done"]), tools=[work])
