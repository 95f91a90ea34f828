"""Agents as tools where they meet stops, takeovers, deletes and clients (issue 43
items 1, 3 and 4).

With real worker processes (SQLite and PostgreSQL): a worker that saved an agent
tool's ``tool.started`` and stalled (SIGSTOP) before it made the child, replaced
meanwhile by a worker that stopped the turn, makes the child when it resumes; the
child runs nothing. In one process (MemoryWorld): a child whose parent moved on
(its turn failed or was asked to stop, or it was deleted) is stopped at its
start; deleting a parent stops its running child and the child's report does not
bring the parent back; a session squatted under the child's id and key fails the
call with an error the model hears, and the web app refuses to create one.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import SURVIVOR_LEASE

import fxworld
from fxworld import Agent, MemoryWorld, TurnStopped, tool
from fxworld.engine import child_session_id, log
from fxworld.testing import ScriptedModel
from fxworld.types import Entry, Fence, NewEntry
from tests.support.waiting import wait_until_async

pytestmark = pytest.mark.timeout(120)

AGENT = "team_agent:agent"


def kinds(entries: list[Entry]) -> list[str]:
    return [e.kind for e in entries]


def desk_with(researcher: Agent[Any], world: Any, replies: Sequence[Any] = ()) -> Agent:
    script = list(replies) or [{"tool": "research", "input": {"input": "Find it."}}, "Done."]
    return Agent(ScriptedModel(script), tools=[researcher.as_tool(name="research")], world=world)


def stalled(pid: int) -> bool:
    """Whether process ``pid`` is stopped (SIGSTOP): state ``T`` in /proc."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


@pytest.fixture
async def client(engine_world_url: str) -> Any:
    """The desk agent in the test process on the test's world: it prompts and reads
    (its sessions are the desk's, run by the workers of ``team_agent.agent``)."""
    world = fxworld.open_world(engine_world_url)
    yield Agent(ScriptedModel(["unused"]), world=world, name="desk")
    await world.close()


@pytest.mark.engine_worlds("sqlite", "postgres")
async def test_a_parent_replaced_before_it_made_its_child_starts_nothing(
    client: Agent, start_worker: Any, tmp_path: Path
) -> None:
    turn = client.session().prompt("When does order A ship?")
    sid = (await turn.accepted).session_id
    # worker A saves the research call's tool.started, then stalls before the child
    a = start_worker(agent=AGENT, env={"FXWORLD_TEST_STALL_AT": "before-child-created"})

    async def a_stalled() -> bool:
        return stalled(a.pid)

    await wait_until_async(a_stalled, 60)
    await client.session(sid).stop("enough")  # the user stops; worker B ends the turn
    b = start_worker(agent=AGENT, lease=SURVIVOR_LEASE)
    with pytest.raises(TurnStopped):
        await asyncio.wait_for(turn, 60)
    parent = await client.world.read(sid, 0)
    (xid,) = {e.data["execution_id"] for e in parent if e.kind == log.TOOL_STARTED}
    child_id = child_session_id(xid)

    a.signal(signal.SIGCONT)  # A resumes: it makes the child, then is refused (Fenced)

    async def child_ended() -> bool:
        return any(k in log.TURN_END_KINDS for k in kinds(await client.world.read(child_id, 0)))

    await wait_until_async(child_ended, 60)
    a.signal(signal.SIGTERM)
    b.signal(signal.SIGTERM)
    assert await a.wait() == 0, a.text()
    assert await b.wait() == 0, b.text()

    child = await client.world.read(child_id, 0)
    assert log.MESSAGE not in kinds(child) and log.TOOL_STARTED not in kinds(child)
    (end,) = [e for e in child if e.kind in log.TURN_END_KINDS]
    assert end.kind == log.TURN_STOPPED
    assert end.data["reason"] == f"its parent session {sid} moved on: its turn was stopped"
    assert not (tmp_path / "researcher.jsonl").exists()  # no model call of the child
    assert not (tmp_path / "runs.jsonl").exists()  # and no effect of its tool
    parent = await client.world.read(sid, 0)
    assert log.CHILD_STARTED not in kinds(parent)  # A was refused at its next append
    assert kinds(parent).count(log.TURN_STOPPED) == 1
    assert "replaced by another worker" in a.text()


# -- in one process ---------------------------------------------------------------------

PARENT = "p-1"
CALL = {"id": "c1", "name": "research", "input": {"input": "Find it."}, "execution_id": "x1"}
WAITING = [
    log.entry(log.PROMPT, text="Find it.", key="k1"),
    log.entry(log.TURN_STARTED, prompt=1, turn="t1"),
    log.entry(log.MESSAGE, call="m1", model="m", text="", tool_calls=[CALL], usage=None),
    log.entry(log.TOOL_STARTED, execution_id="x1", call_id="c1", name="research", attempt=1),
]
"""A parent's log whose turn waits on call x1 of the agent tool ``research``."""


@pytest.mark.parametrize(
    ("after", "why"),
    [
        ([log.entry(log.TURN_FAILED, prompt=1, turn="t1", error="boom")], "moved on: its turn"),
        ([log.entry(log.STOP_REQUESTED, prompt=1, reason=None)], "moved on: its turn was stopped"),
        (None, "was deleted"),
    ],
    ids=["turn-failed", "stop-requested", "deleted"],
)
async def test_a_child_whose_parent_moved_on_is_stopped_at_its_start(
    after: list[NewEntry] | None, why: str
) -> None:
    world = MemoryWorld()
    researcher = Agent(ScriptedModel(["I ran."]), name="researcher")
    desk = desk_with(researcher, world)
    if after is not None:
        await world.append(PARENT, [*WAITING, *after])
    parent = {
        "session": PARENT,
        **{"execution_id": "x1", "call_id": "c1", "name": "research"},
        **{"path": ["research"], "at": len(WAITING)},
    }
    first = log.entry(log.PROMPT, text="Find it.", key="x1", parent=parent)
    await world.append("child-x1", [first], wake=0.0)  # as a replaced parent's worker does
    await asyncio.wait_for(desk.work(until_idle=True, poll_interval=0.02), 30)

    child = await world.read("child-x1", 0)
    assert log.MESSAGE not in kinds(child)  # no model call
    (end,) = [e for e in child if e.kind in log.TURN_END_KINDS]
    assert end.kind == log.TURN_STOPPED and end.data["reason"].startswith(
        f"its parent session {PARENT} {why}"
    )
    stored = await world.read(PARENT, 0)
    if after is None:
        assert stored == []  # its report made no session
    else:
        known = kinds(WAITING) + [a.kind for a in after]
        assert kinds(stored)[: len(known)] == known and kinds(stored).count(log.CHILD_FINISHED) == 1


async def test_deleting_a_parent_stops_its_child_and_the_report_brings_nothing_back() -> None:
    running, release = asyncio.Event(), asyncio.Event()
    effects: list[str] = []

    @tool
    async def refund(order: str) -> str:
        """Refund an order (when released)."""
        running.set()
        await release.wait()
        effects.append(order)
        return "refunded"

    researcher = Agent(
        ScriptedModel([{"tool": "refund", "input": {"order": "A"}}, "Refunded."]), tools=[refund]
    )
    world = MemoryWorld()
    desk = desk_with(researcher, world)
    turn = desk.session().prompt("Refund A.")
    work = asyncio.create_task(desk.work(poll_interval=0.02))
    await asyncio.wait_for(running.wait(), 30)
    (xid,) = {
        e.data["execution_id"]
        for e in await world.read(turn.session_id, 0)
        if e.kind == log.TOOL_STARTED
    }
    child_id = child_session_id(xid)

    await desk.session(turn.session_id).delete()

    async def child_ended() -> bool:
        return any(k in log.TURN_END_KINDS for k in kinds(await world.read(child_id, 0)))

    try:  # (the refund still waits: only a stop ends the child's turn now)
        await wait_until_async(child_ended, 15)
    finally:
        release.set()
    await asyncio.wait_for(desk.work(until_idle=True, poll_interval=0.02), 30)
    desk.stop()
    await asyncio.wait_for(work, 30)

    child = await world.read(child_id, 0)
    (end,) = [e for e in child if e.kind in log.TURN_END_KINDS]
    assert end.kind == log.TURN_STOPPED
    assert end.data["reason"] == f"its parent session {turn.session_id} was deleted"
    assert effects == []  # the refund was cut by the stop
    assert await world.read(turn.session_id, 0) == []  # the report made no session


class Squatted(MemoryWorld):
    """A MemoryWorld where a client creates each child session first, under the
    child's own key (as ``POST /sessions`` with that id and ``Idempotency-Key`` did)."""

    async def append(
        self,
        session_id: str,
        entries: Sequence[NewEntry],
        *,
        fence: Fence | None = None,
        expect: int | None = None,
        key: str | None = None,
        wake: float | None = None,
    ) -> int:
        if session_id.startswith("child-") and "parent" in entries[0].data:
            xid = session_id.removeprefix("child-")
            mine = log.entry(log.PROMPT, text="mine now", key=xid)
            await super().append(session_id, [mine], key=f"prompt:{xid}", expect=0)
        return await super().append(
            session_id, entries, fence=fence, expect=expect, key=key, wake=wake
        )


async def test_a_squatted_child_fails_the_call_and_the_model_hears_it() -> None:
    world = Squatted()
    researcher = Agent(ScriptedModel(["never asked"]), name="researcher")
    desk = desk_with(researcher, world)
    turn = desk.session().prompt("Find it.")
    await asyncio.wait_for(desk.work(until_idle=True, poll_interval=0.02), 30)

    parent = await world.read(turn.session_id, 0)
    assert log.CHILD_STARTED not in kinds(parent)  # no wait for a child that never answers
    (result,) = [e.data for e in parent if e.kind == log.TOOL_FINISHED]
    assert result["is_error"] and "was not made by this call" in result["output"]
    assert kinds(parent)[-1] == log.TURN_FINISHED  # the model heard it and answered
    assert await turn == "Done."


async def test_the_web_app_refuses_to_create_a_session_of_a_childs_id() -> None:
    from fxworld.web import create_app

    desk = desk_with(Agent(ScriptedModel(["x"])), MemoryWorld())
    app = create_app(desk, allow_anyone=True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        body = {"text": "mine", "session_id": child_session_id("x1")}
        r = await http.post("/sessions", json=body, headers={"Idempotency-Key": "x1"})
    assert r.status_code == 400 and "reserved" in r.text
    assert await desk.world.read(child_session_id("x1"), 0) == []
