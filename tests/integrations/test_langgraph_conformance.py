"""LangGraph's own checkpointer suite (langgraph-checkpoint-conformance) passes on
every world: every base capability and every extended one it detects, none
skipped."""

from __future__ import annotations

from collections.abc import AsyncIterator

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from fxworld.integrations.langgraph import WorldSaver
from tests.integrations.conftest import open_test_world


async def test_the_langgraph_conformance_suite_passes_with_every_capability(
    world_url: str,
) -> None:
    world = open_test_world(world_url)
    await world.setup()

    @checkpointer_test(name=f"WorldSaver({world_url.split(':')[0]})")
    async def saver() -> AsyncIterator[WorldSaver]:
        yield WorldSaver(world)

    try:
        report = await validate(saver)
    finally:
        await world.close()
    failures = {c: r.failures for c, r in report.results.items() if r.failures}
    assert not failures, failures
    assert {c for c, r in report.results.items() if r.detected and r.passed} == {
        c.value for c in ALL_CAPABILITIES
    }, report.to_dict()
