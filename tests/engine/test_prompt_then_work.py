"""``turn = session.prompt(...)`` then, in the same coroutine, ``await
agent.work(until_idle=True)`` (the serverless pattern) answers the prompt: ``work()``
first waits for the prompt appends in flight. On every backend, with and without
``asyncio.wait_for`` around ``work()`` (on 3.11 it makes a task of its coroutine, on
3.12 it no longer does)."""

from __future__ import annotations

import asyncio

import pytest

from fxworld import Agent, MemoryWorld
from fxworld.protocol import World
from fxworld.testing import ScriptedModel

pytestmark = pytest.mark.timeout(120)


async def prompt_then_work(world: World | str, wrap: str) -> None:
    agent = Agent(ScriptedModel(["the answer"]), world=world)
    try:
        turn = agent.session().prompt("the question")  # not awaited: its append is pending
        work = agent.work(until_idle=True, lease=10.0)
        if wrap == "wait_for":
            await asyncio.wait_for(work, 60)
        else:
            await work
        # work() returned because nothing was left: the turn must have run already
        kinds = [e.kind for e in await agent.world.read(turn.session_id, 0, limit=100)]
        assert "turn.finished" in kinds, kinds
        assert await asyncio.wait_for(turn.result(), 10) == "the answer"
    finally:
        await agent.world.close()


@pytest.mark.parametrize("wrap", ["plain", "wait_for"])
async def test_prompt_then_work_until_idle_on_memory(wrap: str) -> None:
    await prompt_then_work(MemoryWorld(), wrap)


@pytest.mark.parametrize("wrap", ["plain", "wait_for"])
async def test_prompt_then_work_until_idle(engine_world_url: str, wrap: str) -> None:
    await prompt_then_work(engine_world_url, wrap)
