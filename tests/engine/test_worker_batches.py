"""A worker takes as many due wakes per look as it has room for, on every engine
world: one native ``take_wakes`` call when the world has one (every first-party
world does; with agent routing, ``take_wakes_for``), else a batch that
``fxworld.take_wakes`` builds from ``take_wake``."""

from __future__ import annotations

from typing import Any

import pytest

from fxworld import Agent, open_world
from fxworld.testing import ScriptedModel
from fxworld.types import WakeLease

pytestmark = pytest.mark.timeout(60)


class CountingWorld:
    """A real world whose wake takes are recorded: (method, limit, wakes returned)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.takes: list[tuple[str, int, int]] = []
        if hasattr(inner, "take_wakes"):
            self.take_wakes = self._take_wakes
        if hasattr(inner, "take_wakes_for"):
            self.take_wakes_for = self._take_wakes_for
            # the rest of AgentRouter as attributes too: from Python 3.12, a protocol's
            # isinstance() looks attributes up statically, past __getattr__
            self.claim, self.owner = inner.claim, inner.owner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        wake = await self.inner.take_wake(lease=lease)
        self.takes.append(("take_wake", 1, 0 if wake is None else 1))
        return wake  # type: ignore[no-any-return]

    async def _take_wakes(self, *, lease: float, limit: int = 10) -> list[WakeLease]:
        wakes = list(await self.inner.take_wakes(lease=lease, limit=limit))
        self.takes.append(("take_wakes", limit, len(wakes)))
        return wakes

    async def _take_wakes_for(
        self, agent: str, *, lease: float, limit: int = 10
    ) -> list[WakeLease]:
        wakes = list(await self.inner.take_wakes_for(agent, lease=lease, limit=limit))
        self.takes.append(("take_wakes_for", limit, len(wakes)))
        return wakes


async def test_a_worker_takes_up_to_its_room_of_due_wakes_in_one_look(
    engine_world_url: str,
) -> None:
    world = CountingWorld(open_world(engine_world_url))
    agent = Agent(ScriptedModel(["done"]), world=world)  # type: ignore[arg-type]
    try:
        turns = [agent.session(f"batch-{k}").prompt("go") for k in range(6)]
        for t in turns:
            await t.accepted
        await agent.work(until_idle=True, concurrency=8, lease=10.0)
        assert [await t for t in turns] == ["done"] * 6
        taken = [t for t in world.takes if t[2]]
        if hasattr(world.inner, "take_wakes_for"):  # the agent's own wakes (W19)
            assert taken[0] == ("take_wakes_for", 8, 6)  # one look, room for 8, all 6 due
        elif hasattr(world.inner, "take_wakes"):  # routed by the fallback, in batches
            assert taken[0] == ("take_wakes", 8, 6)
        else:
            assert taken[:6] == [("take_wake", 1, 1)] * 6
    finally:
        await world.inner.close()
