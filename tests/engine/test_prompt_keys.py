"""``prompt(key=)`` on every engine world: the same key and text is one prompt; the
same key with another text is :class:`KeyReused`, and nothing is written."""

from __future__ import annotations

import pytest

from fxworld import Agent, open_world
from fxworld.errors import Conflict, InvalidArgument, KeyReused
from fxworld.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)


async def test_prompt_key_reused_with_another_text_raises(engine_world_url: str) -> None:
    world = open_world(engine_world_url)
    agent = Agent(ScriptedModel(["ok"]), world=world)
    try:
        session = agent.session("s-keys")
        first = await session.prompt("transfer $10", key="k-1").accepted
        again = await session.prompt("transfer $10", key="k-1").accepted
        assert again == first
        with pytest.raises(KeyReused) as caught:
            await session.prompt("transfer $9999", key="k-1").accepted
        assert caught.value.key == "k-1" and caught.value.session_id == "s-keys"
        entries = await session.read(None)
        assert [(e.kind, e.data["text"]) for e in entries] == [("prompt", "transfer $10")]

        # A create (only as the first entry) of an existing session is a Conflict,
        # unless it is that first prompt again.
        assert await session.create("transfer $10", key="k-1") == first
        with pytest.raises(Conflict):
            await session.create("hello", key="k-2")
        await session.prompt("later", key="k-3").accepted
        with pytest.raises(Conflict):
            await session.create("later", key="k-3")
        assert len(await session.read(None)) == 2
    finally:
        await world.close()


async def test_create_refuses_a_prompt_that_is_not_text_and_writes_nothing(
    engine_world_url: str,
) -> None:
    world = open_world(engine_world_url)
    agent = Agent(ScriptedModel(["ok"]), world=world)
    try:
        session = agent.session("s-create")
        with pytest.raises(InvalidArgument):
            await session.create(["not", "text"], key="k-1")  # type: ignore[arg-type]
        assert await session.read(None) == []
        accepted = await session.create("hello", key="k-1")
        assert [e.kind for e in await session.read(None)] == ["prompt"]
        assert accepted.session_id == "s-create"
        assert await session.create("hello", key="k-1") == accepted  # a client's retry
    finally:
        await world.close()
