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


class Limited(pydantic.BaseModel):
    tenant: str
    limits: dict[str, int]


@pytest.mark.parametrize("typed", [False, True])
async def test_what_a_tool_changes_in_its_context_no_other_tool_and_no_child_reads(
    typed: bool,
) -> None:
    """Issue 43 item 11: ``ctx.context`` was one mutable object per run: a tool's
    change was seen by later tools, and a nested change was saved into a child's
    inherited context. Each call now reads the session's saved context."""
    saved = {"tenant": "acme", "limits": {"refund": 100}}
    seen: list[Any] = []

    @tool
    def meddle(ctx: ToolContext[Any]) -> str:
        """Change the context, top level and nested."""
        if typed:
            ctx.context.tenant = "globex"
            ctx.context.limits["refund"] = 10**6
        else:
            ctx.context["tenant"] = "globex"
            ctx.context["limits"]["refund"] = 10**6
            ctx.context["extra"] = True
        return "changed"

    @tool
    def look(ctx: ToolContext[Any]) -> str:
        """Read the context."""
        seen.append(ctx.context.model_dump() if typed else json.loads(json.dumps(ctx.context)))
        return "read"

    context_type = Limited if typed else None
    helper = Agent(
        ScriptedModel([{"tool": "look", "input": {}}, "helped"]),
        tools=[look],
        name="helper",
        context_type=context_type,
    )
    agent = Agent(
        ScriptedModel(
            [
                [{"tool": "meddle", "input": {}}, {"tool": "look", "input": {}}],  # parallel
                {"tool": "look", "input": {}},  # a later call
                {"tool": "helper", "input": {"input": "look"}},  # a child
                "done",
            ]
        ),
        tools=[meddle, look, helper.as_tool()],
        world=MemoryWorld(),
        context_type=context_type,
    )
    turn = agent.session(context=saved).prompt("go")
    await agent.work(until_idle=True)
    assert await turn == "done"
    assert seen == [saved, saved, saved]  # parallel, later, and the child's tool
    session = agent.session(turn.session_id)
    assert await session.saved_context() == saved
    child = next(e for e in await session.read() if e.kind == "child.started")
    assert await agent.session(child.data["session"]).saved_context() == saved
