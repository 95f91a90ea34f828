"""WorldSession keeps the Agents SDK's Session protocol on every world, as the SDK's
own tests expect of its SQLite and Redis sessions, and keeps it under races."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents.memory import Session, SessionSettings

from fxworld import MemoryWorld
from fxworld.integrations.openai_agents import WorldSession
from tests.integrations.conftest import open_test_world
from tests.integrations.reads import CountingReads


def _msg(i: int, role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": f"message {i}"}


@pytest.fixture
async def world(world_url: str) -> Any:
    w = open_test_world(world_url)
    await w.setup()
    yield w
    await w.close()


async def test_it_is_an_agents_sdk_session(world: Any) -> None:
    assert isinstance(WorldSession("s", world), Session)


async def test_items_come_back_in_order_and_limit_gives_the_latest(world: Any) -> None:
    session = WorldSession("conversation 1", world)
    assert await session.get_items() == []
    await session.add_items([_msg(1), _msg(2, "assistant")])
    await session.add_items([_msg(3)])
    await session.add_items([])
    assert await session.get_items() == [_msg(1), _msg(2, "assistant"), _msg(3)]
    assert await session.get_items(limit=2) == [_msg(2, "assistant"), _msg(3)]
    assert await session.get_items(limit=10) == [_msg(1), _msg(2, "assistant"), _msg(3)]
    assert await session.get_items(limit=0) == []
    assert await session.get_items(limit=-1) == [_msg(1), _msg(2, "assistant"), _msg(3)]


async def test_pop_returns_the_newest_and_none_when_empty(world: Any) -> None:
    session = WorldSession("pops", world)
    assert await session.pop_item() is None
    await session.add_items([_msg(1), _msg(2)])
    assert await session.pop_item() == _msg(2)
    assert await session.get_items() == [_msg(1)]
    await session.add_items([_msg(3)])
    assert await session.get_items(limit=1) == [_msg(3)]
    assert await session.pop_item() == _msg(3)
    assert await session.pop_item() == _msg(1)
    assert await session.pop_item() is None
    assert await session.get_items() == []


async def test_clear_empties_only_that_session(world: Any) -> None:
    one, two = WorldSession("one", world), WorldSession("two", world)
    await one.add_items([_msg(1)])
    await two.add_items([_msg(2)])
    await one.clear_session()
    assert await one.get_items() == []
    assert await two.get_items() == [_msg(2)]
    await one.add_items([_msg(3)])
    assert await one.get_items() == [_msg(3)]


async def test_session_settings_limit_is_the_default(world: Any) -> None:
    session = WorldSession("settings", world, session_settings=SessionSettings(limit=2))
    await session.add_items([_msg(i) for i in range(5)])
    assert await session.get_items() == [_msg(3), _msg(4)]
    assert await session.get_items(limit=3) == [_msg(2), _msg(3), _msg(4)]


async def test_any_session_id_is_accepted(world: Any) -> None:
    session = WorldSession("user@example.com/../chat #1 ü" * 10, world)
    await session.add_items([_msg(1)])
    assert await session.get_items() == [_msg(1)]


async def test_two_runners_adding_at_once_lose_no_item(shared_world_url: str) -> None:
    worlds = [open_test_world(shared_world_url) for _ in range(2)]
    for w in worlds:
        await w.setup()
    try:
        runners = [WorldSession("race", w) for w in worlds]

        async def run(r: int) -> None:
            for i in range(15):
                await runners[r].add_items([_msg(100 * r + i), _msg(100 * r + i, "assistant")])

        await asyncio.gather(run(0), run(1))
        items = await runners[0].get_items()
        assert len(items) == 60
        for r in range(2):  # each runner's items whole, in its order
            mine = [it for it in items if int(it["content"].split()[1]) // 100 == r]
            ours = [(_msg(100 * r + i), _msg(100 * r + i, "assistant")) for i in range(15)]
            assert mine == [m for pair in ours for m in pair]
    finally:
        for w in worlds:
            await w.close()


async def test_pop_racing_adds_removes_only_what_it_returns(shared_world_url: str) -> None:
    worlds = [open_test_world(shared_world_url) for _ in range(3)]
    for w in worlds:
        await w.setup()
    try:
        adder, popper1, popper2 = (WorldSession("pop race", w) for w in worlds)
        added = [_msg(i) for i in range(40)]
        popped: list[Any] = []

        async def add() -> None:
            for item in added:
                await adder.add_items([item])

        async def pop(session: WorldSession) -> None:
            for _ in range(15):
                item = await session.pop_item()
                if item is not None:
                    popped.append(item)

        await asyncio.gather(add(), pop(popper1), pop(popper2))
        left = await adder.get_items()
        # every item added is either still there or was returned by exactly one pop
        assert sorted(map(str, left + popped)) == sorted(map(str, added))
        assert len({str(p) for p in popped}) == len(popped)
    finally:
        for w in worlds:
            await w.close()


async def test_get_items_with_a_limit_reads_only_the_last_items() -> None:
    world = CountingReads(MemoryWorld())
    session = WorldSession("long", world)  # type: ignore[arg-type]
    for i in range(500):
        await session.add_items([_msg(i)])
    await session.pop_item()
    world.entries_read = 0
    assert await session.get_items(limit=3) == [_msg(496), _msg(497), _msg(498)]
    assert world.entries_read <= 8  # one first page back from the end
