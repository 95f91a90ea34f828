"""A session's context is entry data (issue 39 item 1): a copy carries it, an
EncryptedWorld seals it; the model sees it only when the agent says so; a turn
whose saved context does not fit the agent's ``context_type`` fails at its start,
before any tool runs."""

from __future__ import annotations

import json
import os
from typing import Any

import pydantic
import pytest

from fxworld import Agent, EncryptedWorld, MemoryWorld, ToolContext, TurnFailed, tool
from fxworld.moving.transfer import copy_session
from fxworld.testing import ScriptedModel, read_recording

pytestmark = pytest.mark.timeout(60)

ACME = {"tenant": "acme", "user": "u-17"}


class Tenant(pydantic.BaseModel):
    tenant: str
    user: str


async def test_a_copy_carries_the_context_and_an_encrypted_world_seals_it() -> None:
    inner = MemoryWorld()
    sealed = EncryptedWorld(inner, {"k1": os.urandom(32)})
    agent = Agent(ScriptedModel(["ok"]), world=sealed)
    await agent.session("s-1", context=ACME).prompt("hello").accepted
    raw = await inner.read("s-1", 0)
    assert "acme" not in json.dumps([e.data for e in raw])  # sealed at rest
    assert await agent.session("s-1").saved_context() == ACME

    target = MemoryWorld()
    await copy_session(sealed, target, "s-1")
    copied = Agent(ScriptedModel(["ok"]), world=target)
    assert await copied.session("s-1").saved_context() == ACME


async def test_the_model_sees_the_context_only_when_the_agent_says_so(tmp_path: Any) -> None:
    heard: dict[str, list[str]] = {}
    for show in (False, True):
        path = tmp_path / f"model-{show}.jsonl"
        agent = Agent(
            ScriptedModel(["ok"], record_to=path),
            instructions="Be kind.",
            world=MemoryWorld(),
            show_context=show,
        )
        turn = agent.session(context=ACME).prompt("hello")
        await agent.work(until_idle=True)
        assert await turn == "ok"
        heard[str(show)] = [r["instructions"] for r in read_recording(path)]
    assert heard["False"] == ["Be kind."]
    assert "u-17" in heard["True"][0] and heard["True"][0].startswith("Be kind.")


async def test_a_saved_context_that_does_not_fit_context_type_fails_the_turn_at_its_start() -> None:
    ran: list[str] = []

    @tool
    def whoami(ctx: ToolContext[Tenant]) -> str:
        """Who the session serves."""
        ran.append(ctx.context.user)
        return ctx.context.user

    world = MemoryWorld()
    agent = Agent(
        ScriptedModel([{"tool": "whoami", "input": {}}, "done"]),
        tools=[whoami],
        world=world,
        context_type=Tenant,
    )
    await (
        Agent(ScriptedModel([]), world=world)
        .session("s-old", context={"tenant": "acme"})
        .prompt("made by an app without context_type")
        .accepted
    )
    turn = agent.session("s-old").prompt("again")
    await agent.work(until_idle=True)
    with pytest.raises(TurnFailed, match="does not match Tenant: user: Field required"):
        await turn
    assert ran == []  # no tool ran with it
