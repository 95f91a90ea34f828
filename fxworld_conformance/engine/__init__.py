"""The engine tier: the turn engine run on the world under test.

Each scenario is a short program of one engine feature on a fresh world, in one
process: agents of ``fxworld.Agent`` with a scripted model, workers run until
idle, and where a crash is part of the story the kit's in-process crash (the
worker's task cancelled inside a tool, its lease left to run out). A world that
keeps W1-W19 keeps these too; they show it for the engine's newest entry kinds
(docs/log-format.md) on every world the kit runs on, and catch an engine that
breaks them. One module per part: ``context.py`` (per-session context),
``answers.py`` (typed answers), ``steps.py`` (durable steps), ``agents.py``
(agents as tools); ``bench.py`` holds what they share. This module holds the
one table, :data:`SCENARIOS`, and runs one.

Both doors run it: ``run_kit`` and the CLI (the ``engine`` tier, one row per
scenario: :func:`fxworld_conformance.runner.run_check`), ``WorldSuite``
(``test_engine[<id>]``). A failure names the engine, not a guarantee W1-W19: the
report's ``engine`` row.
"""

from __future__ import annotations

import asyncio

from fxworld_conformance.engine import agents, answers, context, steps
from fxworld_conformance.engine.bench import Bench, EngineScenario
from fxworld_conformance.target import CALL_TIMEOUT, Target

__all__ = ["SCENARIOS", "EngineScenario", "run_engine_scenario"]

SCENARIOS: list[EngineScenario] = [
    *context.SCENARIOS,
    *answers.SCENARIOS,
    *steps.SCENARIOS,
    *agents.SCENARIOS,
]
"""Every engine scenario, by part: the table both doors of the kit run."""


async def run_engine_scenario(s: EngineScenario, target: Target) -> None:
    """Run one engine scenario on a fresh world of ``target``; it raises what failed."""
    namespace = target.fresh_namespace() if target.url else None
    world = await asyncio.wait_for(target.open(namespace), CALL_TIMEOUT)
    bench = Bench(world, target)
    try:
        await s.run(bench)
    finally:
        await bench.close()
        await target.close(world)
