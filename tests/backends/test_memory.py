"""MemoryWorld keeps every guarantee W1-W17 (the reference implementation)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from fxworld import MemoryWorld, NewEntry, World, open_world
from tests.guarantees import GuaranteeTests


class TestMemoryWorld(GuaranteeTests):
    @pytest.fixture
    async def world(self) -> AsyncIterator[World]:
        w = MemoryWorld()
        await w.setup()
        yield w
        await w.close()


def test_memory_url_and_capabilities() -> None:
    w = open_world("memory://?namespace=tenant_a")
    assert isinstance(w, MemoryWorld)
    assert w.namespace == "tenant_a"
    assert "durable" not in w.capabilities and "shared" not in w.capabilities


def test_one_world_follows_in_one_event_loop_after_another() -> None:
    """A world that outlives its event loop (a module-level world, ``asyncio.run``
    called twice) still wakes its followers in the next loop."""
    w = MemoryWorld()

    async def gave_up_waiting() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(w.follow("s")), 0.2)

    async def follows() -> int:
        async def append_soon() -> None:
            await asyncio.sleep(0.1)
            await w.append("s", [NewEntry("m", {})])

        writer = asyncio.create_task(append_soon())
        entry = await asyncio.wait_for(anext(w.follow("s")), 10)
        await writer
        return entry.seq

    asyncio.run(gave_up_waiting())
    assert asyncio.run(follows()) == 1
