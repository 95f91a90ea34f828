"""The bounds of a turn (issue 43 items 9 and 2): a turn makes at most
``max_model_calls`` model calls (50 by default, per agent and per prompt, counted
from the log so the bound holds across workers), and agents as tools nest at most
``max_depth`` deep (5 by default): past it the model reads a refusal and no child
session is made. Findings: a turn made 301 model calls; an agent that had itself as
a tool made over 500 nested child sessions and its root turn never ended."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import httpx
import loop_agent
import pytest
from conftest import SURVIVOR_LEASE

import fxworld
from fxworld import Agent, MemoryWorld, TooManyModelCalls, TurnFailed, tool
from fxworld.engine import child_session_id, log
from fxworld.errors import ConfigurationError, InvalidArgument
from fxworld.testing import ScriptedModel
from fxworld.web import create_inspector

pytestmark = pytest.mark.timeout(120)

LOOK = {"tool": "look", "input": {}}


@tool
def look() -> str:
    """Look once more."""
    return "nothing found yet"


def looping(n: int = 80) -> ScriptedModel:
    """A model that calls ``look`` again and again (``n`` times, then errs)."""
    return ScriptedModel([LOOK] * n)


async def kinds(world: MemoryWorld, sid: str) -> list[str]:
    return [e.kind for e in await world.read(sid, 0)]


async def test_a_turn_ends_at_the_default_limit_of_50_model_calls_with_a_typed_error() -> None:
    world = MemoryWorld()
    agent = Agent(looping(), tools=[look], world=world)
    assert agent.max_model_calls == 50
    session = agent.session("loop")
    turn = session.prompt("find it")
    await agent.work(until_idle=True)
    with pytest.raises(TooManyModelCalls) as ended:
        await turn
    assert isinstance(ended.value, TurnFailed) and ended.value.limit == 50
    assert "max_model_calls=50" in ended.value.error
    assert (await kinds(world, "loop")).count(log.MESSAGE) == 50

    # the stream carries it, typed: the reason and the limit
    events = [e async for e in session.stream(until="turn")]
    assert events[-1].kind == log.TURN_FAILED
    assert events[-1].data["reason"] == "max_model_calls" and events[-1].data["limit"] == 50
    # and the inspector shows it
    app = create_inspector(world, allow_anyone=True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://inspect") as client:
        page = await client.get("/sessions/loop")
    await app.state.close()
    assert "the turn failed" in page.text and "max_model_calls=50" in page.text


async def test_an_agents_limit_and_a_prompts_own_limit() -> None:
    world = MemoryWorld()
    agent = Agent(looping(), tools=[look], world=world, max_model_calls=4)
    short = agent.session("short").prompt("find it", max_model_calls=2)
    usual = agent.session("usual").prompt("find it")
    # the prompt's limit is saved with it: another worker, whose agent would allow
    # 50, honours it
    other = Agent(looping(), tools=[look], world=world)
    await other.work(until_idle=True)
    with pytest.raises(TooManyModelCalls) as ended:
        await short
    assert ended.value.limit == 2
    assert (await kinds(world, "short")).count(log.MESSAGE) == 2
    with pytest.raises(TooManyModelCalls):
        await usual  # run by `other`, whose agent allows 50 model calls
    assert (await kinds(world, "usual")).count(log.MESSAGE) == 50

    agent_run = agent.session("agents").prompt("find it")
    await agent.work(until_idle=True)
    with pytest.raises(TooManyModelCalls):
        await agent_run
    assert (await kinds(world, "agents")).count(log.MESSAGE) == 4


async def test_the_model_calls_are_counted_from_the_log_across_workers() -> None:
    """A worker hands the turn over after two model calls; the next worker (a new
    agent object, as a new process would have) makes one more, not three."""
    world = MemoryWorld()
    first: Agent[str]

    @tool(name="look")
    def look_then_hand_over() -> str:
        first.stop()  # SIGTERM, in effect: the turn is handed on at the next step
        return "nothing found yet"

    first = Agent(looping(), tools=[look_then_hand_over], world=world, max_model_calls=3)
    turn = first.session("handed").prompt("find it")
    await first.work(until_idle=True)
    assert (await kinds(world, "handed")).count(log.TURN_YIELDED) == 1
    assert (await kinds(world, "handed")).count(log.MESSAGE) == 1
    second = Agent(looping(), tools=[look], world=world, max_model_calls=3)
    await second.work(until_idle=True)
    with pytest.raises(TooManyModelCalls):
        await turn
    assert (await kinds(world, "handed")).count(log.MESSAGE) == 3


async def test_the_bound_holds_across_a_sigkill_of_the_worker(
    engine_world_url: str, start_worker: Any
) -> None:
    """Real worker processes: the first is killed right after the turn's third
    model call is saved; the second makes one more (the limit is 4), not four."""
    world = fxworld.open_world(engine_world_url)
    client = Agent(ScriptedModel([]), world=world)
    turn = client.session().prompt("find it")
    sid = (await turn.accepted).session_id
    first = start_worker(agent="loop_agent:agent", env={"FXWORLD_TEST_CRASH_AT": "after-message#3"})
    assert await first.wait() == -signal.SIGKILL, first.text()
    second = start_worker(agent="loop_agent:agent", lease=SURVIVOR_LEASE)
    with pytest.raises(TooManyModelCalls) as ended:
        await asyncio.wait_for(turn.result(), 60)
    second.signal(signal.SIGTERM)
    assert await second.wait() == 0, second.text()
    assert ended.value.limit == loop_agent.LIMIT
    kinds = [e.kind for e in await world.read(sid, 0)]
    assert kinds.count(log.MESSAGE) == loop_agent.LIMIT
    await world.close()


def test_a_bad_limit_is_refused_before_anything_is_written() -> None:
    with pytest.raises(ConfigurationError, match="max_model_calls"):
        Agent(looping(), max_model_calls=0)
    with pytest.raises(ConfigurationError, match="max_depth"):
        Agent(looping(), max_depth=-1)
    world = MemoryWorld()
    agent = Agent(looping(), world=world, max_model_calls=None)  # None: no bound
    assert agent.max_model_calls is None

    async def prompt() -> None:
        with pytest.raises(InvalidArgument, match="max_model_calls"):
            agent.session("s").prompt("hi", max_model_calls=0)
        assert await world.read("s", 0) == []

    asyncio.run(prompt())


async def test_agents_as_tools_nest_at_most_max_depth_and_the_model_hears_why() -> None:
    """An agent that has itself as a tool: each session asks it again. The default
    bound, 5, lets five child sessions be made; the sixth call is refused as its
    result, and every turn then ends."""
    world = MemoryWorld()
    deeper = {"tool": "helper", "input": {"input": "ask yourself again"}}
    agent = Agent(ScriptedModel([deeper, "done"]), world=world, name="helper")
    assert agent.max_depth == 5
    agent.tools["helper"] = agent.as_tool()
    turn = agent.session("root").prompt("go")
    await asyncio.wait_for(agent.work(until_idle=True), 60)
    assert await asyncio.wait_for(turn, 10) == "done"

    sid, depth = "root", 0
    while True:  # walk down the chain of children
        entries = await world.read(sid, 0)
        (started,) = [e for e in entries if e.kind == log.TOOL_STARTED]
        child = child_session_id(started.data["execution_id"])
        if not await world.read(child, 0):
            break
        first = (await world.read(child, 0))[0]
        depth += 1
        assert first.data["parent"]["path"] == ["helper"] * depth  # saved: its depth
        sid = child
    assert depth == 5
    (refused,) = [e for e in entries if e.kind == log.TOOL_FINISHED]
    assert refused.data["is_error"] is True
    output = refused.data["output"]
    assert "max_depth=5" in output and "no agent was asked" in output
    messages = [m for m in await agent.session(sid).messages() if m.role == "tool"]
    assert "max_depth=5" in messages[0].text  # what the model read
    assert len(await world.list_sessions()) == 6  # the root and its five children


async def test_max_depth_zero_refuses_every_agent_tool_call() -> None:
    world = MemoryWorld()
    helper = Agent(ScriptedModel(["helped"]), world=world, name="helper")
    boss = Agent(
        ScriptedModel([{"tool": "helper", "input": {"input": "help"}}, "alone"]),
        tools=[helper.as_tool()],
        world=world,
        max_depth=0,
    )
    turn = boss.session("boss").prompt("go")
    await boss.work(until_idle=True)
    assert await turn == "alone"
    assert await world.list_sessions() == ["boss"]
