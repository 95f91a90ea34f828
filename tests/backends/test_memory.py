"""MemoryWorld keeps every guarantee W1-W19 (the reference implementation): the
whole kit and its example tests, plus what is MemoryWorld's own."""

from __future__ import annotations

import asyncio
import pathlib

import pytest

from fxworld import MemoryWorld, NewEntry, open_world, take_wakes
from fxworld.errors import InvalidArgument
from fxworld_conformance import Target, WorldSuite


class TestMemoryWorld(WorldSuite):
    @pytest.fixture
    def fxworld_target(self) -> Target:
        return Target(url="memory://")


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


async def test_take_wakes_takes_the_earliest_due_first() -> None:
    w = MemoryWorld()
    for sid in ("c", "a", "d", "b"):  # due in this order, not in the order of their names
        await w.wake(sid)
        await asyncio.sleep(0.002)
    first = await take_wakes(w, lease=30, limit=2)
    assert sorted(x.session_id for x in first) == ["a", "c"]
    assert sorted(x.session_id for x in await take_wakes(w, lease=30, limit=5)) == ["b", "d"]


@pytest.mark.parametrize("after", [5, None, b"a"])
async def test_memory_list_sessions_refuses_a_non_string_after(
    after: object, tmp_path: pathlib.Path
) -> None:
    """``list_sessions(after=5)`` on memory raised a bare ``TypeError`` from
    comparing ids with it; now it is the ``InvalidArgument`` SQLite (and every
    backend) raises, from the one check in ``validate.list_args``."""
    memory, sqlite = MemoryWorld(), open_world(f"sqlite:///{tmp_path / 'w.db'}")
    await memory.append("s", [NewEntry("m", {})])
    errors = []
    for w in (memory, sqlite):
        with pytest.raises(InvalidArgument) as caught:
            await w.list_sessions(after=after)  # type: ignore[attr-defined]
        errors.append(str(caught.value))
    await sqlite.close()
    assert errors[0] == errors[1] == f"after must be a string, not {type(after).__name__}"
    assert await memory.list_sessions() == ["s"]
