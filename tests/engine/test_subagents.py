"""Agents as tools (``agent.as_tool()``, issue 39 item 3): a call runs a turn of
another agent in a child session.

With real worker processes, on every engine world: a SIGKILL inside the child's
turn; the child's turn is started once and the parent gets its answer. On
SQLite: a parent killed right after it made its child finds the same child, and
one trace holds both turns. In one process (MemoryWorld): a stop of the parent
stops its running child; an approval inside the child is decided on the child
(over HTTP) while the parent waits; bad input; a child whose agent is gone.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest
import team_agent
from conftest import SURVIVOR_LEASE, read_jsonl
from test_tracing import caller, named, spans_of

import fxworld
from fxworld import Agent, MemoryWorld, ToolContext, TurnStopped, tool
from fxworld.engine import child_session_id, log
from fxworld.errors import InvalidArgument
from fxworld.testing import ScriptedModel
from fxworld.types import Entry
from tests.support.waiting import wait_until_async

pytestmark = pytest.mark.timeout(120)

AGENT = "team_agent:agent"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "log-format.md"


@pytest.fixture
async def client(engine_world_url: str) -> Any:
    """The desk agent in the test process on the test's world: it prompts and reads
    (its sessions are the desk's, run by the workers of ``team_agent.agent``)."""
    world = fxworld.open_world(engine_world_url)
    yield Agent(ScriptedModel(["unused"]), world=world, name="desk")
    await world.close()


async def both_logs(client: Agent, sid: str) -> tuple[list[Entry], list[Entry]]:
    """The parent's log and its (one) child's."""
    parent = await client.world.read(sid, 0)
    (xid,) = {e.data["execution_id"] for e in parent if e.kind == log.TOOL_STARTED}
    return parent, await client.world.read(child_session_id(xid), 0)


def kinds(entries: list[Entry]) -> list[str]:
    return [e.kind for e in entries]


async def test_a_sigkill_in_the_childs_turn_resumes_both_and_starts_the_child_once(
    client: Agent, start_worker: Any, tmp_path: Path
) -> None:
    turn = client.session(context={"tenant": "acme"}).prompt("When does order A ship?")
    sid = (await turn.accepted).session_id
    first = start_worker(agent=AGENT, env={"FXWORLD_TEST_CRASH_AT": "in-tool:search"})
    assert await first.wait() == -signal.SIGKILL, first.text()
    second = start_worker(agent=AGENT, lease=SURVIVOR_LEASE)
    assert await asyncio.wait_for(turn, 60) == team_agent.FINAL
    second.signal(signal.SIGTERM)
    assert await second.wait() == 0, second.text()

    parent, child = await both_logs(client, sid)
    child_id = child[0].session_id
    assert kinds(child).count(log.PROMPT) == 1 and kinds(child).count(log.TURN_STARTED) == 1
    assert kinds(child).count(log.TURN_FINISHED) == 1
    assert child[0].data["text"] == team_agent.TASK
    assert child[0].data["parent"]["session"] == sid  # the child's log names its parent
    assert child[0].data["context"] == {"tenant": "acme"}  # and inherits its context
    assert {e.data["session"] for e in parent if e.kind == log.CHILD_STARTED} == {child_id}
    (answer,) = [e.data for e in parent if e.kind == log.CHILD_FINISHED]
    assert answer["output"] == team_agent.FOUND and answer["is_error"] is False
    assert kinds(parent).count(log.TURN_FINISHED) == 1

    runs = read_jsonl(tmp_path / "runs.jsonl")  # the child's tool, killed, then run again
    assert [(r["attempt"], r["pid"]) for r in runs] == [(1, first.pid), (2, second.pid)]
    assert all(r["session"] == child_id and r["tenant"] == "acme" for r in runs)
    heard = read_jsonl(tmp_path / "desk.jsonl")[-1]["messages"]
    assert heard[-1]["role"] == "tool" and heard[-1]["text"] == team_agent.FOUND


@pytest.mark.engine_worlds("sqlite")
async def test_a_parent_killed_after_making_its_child_finds_the_same_child(
    client: Agent, start_worker: Any, tmp_path: Path
) -> None:
    turn = client.session().prompt("When does order A ship?")
    sid = (await turn.accepted).session_id
    first = start_worker(agent=AGENT, env={"FXWORLD_TEST_CRASH_AT": "after-child-created"})
    assert await first.wait() == -signal.SIGKILL, first.text()
    # the child's search waits until the parent ran its call again, so the child
    # cannot answer before the parent looked for it
    second = start_worker(agent=AGENT, lease=SURVIVOR_LEASE, env={"TEAM_HOLD_SEARCH": "1"})

    async def parent_waits() -> bool:
        return log.CHILD_STARTED in kinds(await client.world.read(sid, 0))

    await wait_until_async(parent_waits, 60)
    (tmp_path / "release").touch()
    assert await asyncio.wait_for(turn, 60) == team_agent.FINAL
    second.signal(signal.SIGTERM)
    assert await second.wait() == 0, second.text()

    parent, child = await both_logs(client, sid)
    research = [e.data["attempt"] for e in parent if e.kind == log.TOOL_STARTED]
    assert research == [1, 2]  # the call ran again ...
    assert kinds(parent).count(log.CHILD_STARTED) == 1  # ... and found its child
    assert kinds(child).count(log.PROMPT) == 1 and kinds(child).count(log.TURN_STARTED) == 1
    assert [r["attempt"] for r in read_jsonl(tmp_path / "runs.jsonl")] == [1]


@pytest.mark.engine_worlds("sqlite")
async def test_one_trace_holds_the_parent_and_the_child_turns(
    client: Agent, start_worker: Any, tmp_path: Path
) -> None:
    tracer, exporter = caller()
    with tracer.start_as_current_span("POST /sessions"):
        turn = client.session().prompt("When does order A ship?")
        await turn.accepted
    (root,) = exporter.get_finished_spans()
    worker = start_worker(agent=AGENT, env={"ENGINE_TEST_OTEL": "1"}, args=("--until-idle",))
    assert await worker.wait() == 0, worker.text()
    assert await turn == team_agent.FINAL

    spans = spans_of(tmp_path, worker.pid)
    assert {s["context"]["trace_id"] for s in spans} == {f"0x{root.context.trace_id:032x}"}
    (tool_span,) = named(spans, "execute_tool research")
    (child_turn,) = named(spans, "invoke_agent researcher")
    assert child_turn["parent_id"] == tool_span["context"]["span_id"]
    parent_id, child_id = turn.session_id, child_turn["attributes"]["gen_ai.conversation.id"]
    assert child_id == child_session_id(tool_span["attributes"]["fxworld.execution_id"])
    assert all(
        s["attributes"]["gen_ai.conversation.id"] == parent_id
        for s in named(spans, "invoke_agent desk")
    )
    assert len(named(spans, "chat")) == 4  # two model calls of each agent


# -- in one process ---------------------------------------------------------------------


def desk_with(researcher: Agent[Any], world: Any) -> Agent:
    return Agent(
        ScriptedModel([{"tool": "research", "input": {"input": "Find it."}}, "Done."]),
        tools=[researcher.as_tool(name="research")],
        world=world,
    )


async def test_a_stop_of_the_parent_stops_its_running_child() -> None:
    running = asyncio.Event()

    @tool
    async def search(query: str) -> str:
        """Search (slowly)."""
        running.set()
        await asyncio.sleep(60)  # cut by the stop
        return "never"

    researcher = Agent(
        ScriptedModel([{"tool": "search", "input": {"query": "A"}}, "x"]), tools=[search]
    )
    desk = desk_with(researcher, MemoryWorld())
    turn = desk.session().prompt("Find it.")
    work = asyncio.create_task(desk.work(poll_interval=0.02))
    await asyncio.wait_for(running.wait(), 30)
    await desk.session(turn.session_id).stop("enough")
    with pytest.raises(TurnStopped):
        await asyncio.wait_for(turn, 30)
    parent, child = await both_logs(desk, turn.session_id)

    async def child_stopped() -> bool:
        return log.TURN_STOPPED in kinds(await desk.world.read(child[0].session_id, 0))

    await wait_until_async(child_stopped, 30)
    desk.stop()
    await asyncio.wait_for(work, 30)
    parent, child = await both_logs(desk, turn.session_id)
    (stop,) = [e.data for e in child if e.kind == log.STOP_REQUESTED]
    assert stop["reason"] == f"its parent session {turn.session_id} was stopped: enough"
    assert stop["actor"] == f"session:{turn.session_id}"  # who stopped the child
    assert log.TOOL_INTERRUPTED in kinds(child)  # the async tool was cut
    # the child's answer, stopped, lands once; the parent's turn ended stopped once
    (answer,) = [e.data for e in parent if e.kind == log.CHILD_FINISHED]
    assert answer["outcome"] == "stopped" and kinds(parent).count(log.TURN_STOPPED) == 1


class Shipping(pydantic.BaseModel):
    date: str


async def test_an_approval_in_the_child_is_decided_on_the_child_while_the_parent_waits() -> None:
    from fxworld.web import create_app

    @tool(needs_approval=True)
    def ask_carrier(order: str, ctx: ToolContext) -> str:
        """Ask the carrier (a person approves it)."""
        return f"{order} ships 3 May for {ctx.context['tenant']}"

    researcher = Agent(
        ScriptedModel([{"tool": "ask_carrier", "input": {"order": "A"}}, '{"date": "3 May"}']),
        tools=[ask_carrier],
        output_type=Shipping,
    )
    desk = desk_with(researcher, MemoryWorld())
    turn = desk.session(context={"tenant": "acme"}).prompt("When does A ship?")
    await asyncio.wait_for(desk.work(until_idle=True, poll_interval=0.02), 30)
    parent, child = await both_logs(desk, turn.session_id)
    assert kinds(parent)[-1] == log.CHILD_STARTED  # the parent waits, holding nothing
    assert await desk.session(turn.session_id).pending_approvals() == []
    child_id = child[0].session_id
    (waiting,) = await desk.session(child_id).pending_approvals()

    app = create_app(desk, allow_anyone=True)  # decided like any other: here over HTTP
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        url = f"/sessions/{child_id}/approvals/{waiting.execution_id}"
        decided = await http.post(url, json={"approve": True})
    assert decided.status_code < 300, decided.text
    await asyncio.wait_for(desk.work(until_idle=True, poll_interval=0.02), 30)
    assert await turn == "Done."
    parent, child = await both_logs(desk, turn.session_id)
    (answer,) = [e.data for e in parent if e.kind == log.CHILD_FINISHED]
    assert json.loads(answer["output"]) == {"date": "3 May"}  # the child's typed answer
    assert "3 May for acme" in next(e.data["output"] for e in child if e.kind == "tool.finished")


async def test_bad_input_to_an_agent_tool_is_a_clear_error_and_makes_no_child() -> None:
    researcher = Agent(ScriptedModel(["x"]), name="researcher")
    with pytest.raises(InvalidArgument, match="name is 1 to 64"):
        researcher.as_tool(name="no spaces")
    with pytest.raises(InvalidArgument, match="description must be a str"):
        researcher.as_tool(description=3)  # type: ignore[arg-type]
    made = researcher.as_tool()
    assert made.name == "researcher" and made.input_schema["required"] == ["input"]
    with pytest.raises(InvalidArgument, match="only inside a turn"):
        await made.call({"input": "x"}, ToolContext("x", "s", "c", "researcher"))

    desk = Agent(
        ScriptedModel([{"tool": "researcher", "input": {"task": 1}}, "Sorry."]),
        tools=[made],
        world=MemoryWorld(),
    )
    turn = desk.session().prompt("Go.")
    await asyncio.wait_for(desk.work(until_idle=True, poll_interval=0.02), 30)
    assert await turn == "Sorry."
    stored = await desk.world.read(turn.session_id, 0)
    (result,) = [e.data for e in stored if e.kind == log.TOOL_FINISHED]
    assert result["is_error"] and "an agent tool's input is {'input': str}" in result["output"]
    assert await desk.world.read(child_session_id(result["execution_id"]), 0) == []


async def test_an_agent_tool_of_a_child_runs_a_grandchild_with_its_own_agent() -> None:
    leaf = Agent(ScriptedModel(["leaf says 42"]), name="leaf")
    mid = Agent(
        ScriptedModel([{"tool": "leaf", "input": {"input": "ask the leaf"}}, "mid heard 42"]),
        tools=[leaf.as_tool()],
    )
    top = desk_with(mid, MemoryWorld())
    turn = top.session(context={"tenant": "acme"}).prompt("Go.")
    await asyncio.wait_for(top.work(until_idle=True, poll_interval=0.02), 30)
    assert await turn == "Done."
    _, child = await both_logs(top, turn.session_id)
    (answer,) = [e.data for e in child if e.kind == log.CHILD_FINISHED]
    assert answer["output"] == "leaf says 42"
    grandchild = await top.world.read(answer["session"], 0)
    assert grandchild[0].data["parent"]["path"] == ["research", "leaf"]
    assert grandchild[0].data["parent"]["session"] == child[0].session_id
    assert grandchild[0].data["context"] == {"tenant": "acme"}  # inherited down the line


async def test_a_fork_of_a_child_runs_with_the_childs_agent_and_answers_no_parent() -> None:
    researcher = Agent(ScriptedModel(["3 May", "still 3 May"]), name="researcher")
    desk = desk_with(researcher, MemoryWorld())
    turn = desk.session().prompt("Find it.")
    await asyncio.wait_for(desk.work(until_idle=True, poll_interval=0.02), 30)
    assert await turn == "Done."
    _, child = await both_logs(desk, turn.session_id)
    fork = await desk.session(child[0].session_id).fork()
    again = fork.prompt("Sure?")
    await asyncio.wait_for(desk.work(until_idle=True, poll_interval=0.02), 30)
    assert await again == "still 3 May"  # the researcher's model, not the desk's
    parent = await desk.world.read(turn.session_id, 0)
    assert kinds(parent).count(log.CHILD_FINISHED) == 1


async def test_a_child_whose_agent_is_gone_fails_and_its_parent_hears_it() -> None:
    world = MemoryWorld()
    agent = Agent(ScriptedModel(["never asked"]), world=world)
    await world.append("p-1", [log.entry("note", text="the parent")])  # (it exists)
    parent = {"session": "p-1", "execution_id": "x1", "call_id": "c1", "name": "gone"}
    first = log.entry(log.PROMPT, text="Find it.", key="x1", parent={**parent, "path": ["gone"]})
    await world.append("child-x1", [first], wake=0.0)
    await asyncio.wait_for(agent.work(until_idle=True, poll_interval=0.02), 30)
    (failed,) = [e for e in await world.read("child-x1", 0) if e.kind == log.TURN_FAILED]
    assert "no agent runs this child session" in failed.data["error"]
    _, answer = await world.read("p-1", 0)
    assert answer.kind == log.CHILD_FINISHED and answer.data["is_error"] is True
    assert answer.data["outcome"] == "failed" and "'gone'" in answer.data["output"]


def test_the_child_kinds_are_documented_in_the_log_format() -> None:
    text = DOCS.read_text()
    for kind in (log.CHILD_STARTED, log.CHILD_FINISHED):
        assert re.search(rf"^\| `{re.escape(kind)}` \(v 4\) \|", text, re.M), kind
    assert f"(version {log.LOG_VERSION})" in text.splitlines()[0]


async def test_the_inspector_links_parent_and_child_both_ways() -> None:
    from fxworld.web import create_inspector

    @tool(idempotent=True)
    def search(query: str) -> str:
        """Search."""
        return "3 May"

    researcher = Agent(
        ScriptedModel([{"tool": "search", "input": {"query": "A"}}, "3 May"]), tools=[search]
    )
    desk = desk_with(researcher, MemoryWorld())
    turn = desk.session().prompt("Find it.")
    await asyncio.wait_for(desk.work(until_idle=True, poll_interval=0.02), 30)
    assert await turn == "Done."
    _, child = await both_logs(desk, turn.session_id)
    app = create_inspector(desk.world, allow_anyone=True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://inspect") as http:
        up = await http.get(f"/sessions/{turn.session_id}")
        down = await http.get(f"/sessions/{child[0].session_id}")
    await app.state.close()
    assert up.status_code == down.status_code == 200
    assert f'href="./{child[0].session_id}"' in up.text  # child.started, child.finished
    assert f'href="./{turn.session_id}"' in down.text  # the child's first prompt
    assert "its child session" in up.text and "asked by session" in down.text
