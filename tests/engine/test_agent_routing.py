"""Many agents, one world (issue 44): each session belongs to the agent of its first
prompt, and only that agent's workers run it.

In one process: a prompt through another agent is refused before anything is
written; two agents' workers on one MemoryWorld answer only their own sessions; a
worker handed another agent's wake (a world whose take ignores the agent) hands it
back unrun; a world without the seam (``AgentRouter`` hidden) is routed by the
fallback; a rename moves an agent's sessions. With worker processes (SQLite,
PostgreSQL, PostgreSQL behind PgBouncer): two agents, one worker process each, 50
sessions each, every session answered by its own agent; a parent and its child on
different agents in different processes both finish.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import HERE, REPO, Proc

import fxworld
from fxworld import Agent, MemoryWorld, open_world
from fxworld.engine import log
from fxworld.engine.owners import rename_agent
from fxworld.errors import ConfigurationError, WrongAgent
from fxworld.protocol import AgentRouter, World
from fxworld.testing import ScriptedModel
from fxworld.types import Entry, Fence, NewEntry, WakeLease
from fxworld_conformance.broken import BROKEN
from tests.support.waiting import wait_until_async

pytestmark = pytest.mark.timeout(180)

N = 50
"""Sessions per agent in the two-agent tests (the issue's figure)."""


class HiddenSeam:
    """A world that has only the World protocol: the seam (and batches) hidden,
    as a third-party world without them is."""

    def __init__(self, inner: World) -> None:
        self.inner = inner
        self.capabilities = inner.capabilities

    async def setup(self) -> None:
        await self.inner.setup()

    async def close(self) -> None:
        await self.inner.close()

    async def acquire(self, session_id: str) -> Fence:
        return await self.inner.acquire(session_id)

    async def append(self, session_id: str, entries: Sequence[NewEntry], **kw: Any) -> int:
        return await self.inner.append(session_id, entries, **kw)

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        return await self.inner.read(session_id, after, limit=limit)

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Entry]:
        return self.inner.follow(session_id, after)

    async def wake(self, session_id: str, *, delay: float = 0.0) -> None:
        await self.inner.wake(session_id, delay=delay)

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        return await self.inner.take_wake(lease=lease)

    async def renew_wake(self, wake: WakeLease, *, lease: float) -> WakeLease:
        return await self.inner.renew_wake(wake, lease=lease)

    async def finish_wake(self, wake: WakeLease) -> None:
        await self.inner.finish_wake(wake)

    async def delete(self, session_id: str) -> None:
        await self.inner.delete(session_id)


def two_agents(world: Any) -> tuple[Agent, Agent]:
    support = Agent(ScriptedModel(["support answers"]), world=world, name="support")
    sales = Agent(ScriptedModel(["sales answers"]), world=world, name="sales")
    return support, sales


async def answers(world: World, sid: str) -> list[str]:
    """The texts of the turns that finished in session ``sid``."""
    return [e.data["text"] for e in await world.read(sid, 0) if e.kind == log.TURN_FINISHED]


async def prompt_all(agent: Agent, n: int) -> list[str]:
    sids = [f"{agent.name}-{i}" for i in range(n)]
    await asyncio.gather(*(agent.session(s).prompt("Hello?").accepted for s in sids))
    return sids


def test_an_agent_has_a_stable_name_and_a_bad_one_is_refused() -> None:
    assert Agent(ScriptedModel(["x"])).name == "agent"  # the same in every process
    assert Agent(ScriptedModel(["x"]), name="support:eu-1.v2").name == "support:eu-1.v2"
    for bad in ("", "no spaces", "x" * 65, "a/b"):
        with pytest.raises(ConfigurationError, match="agent name"):
            Agent(ScriptedModel(["x"]), name=bad)


@pytest.mark.parametrize("seam", [True, False], ids=["router", "no-seam"])
async def test_a_prompt_through_another_agent_is_refused_before_anything_is_written(
    seam: bool,
) -> None:
    world = MemoryWorld() if seam else HiddenSeam(MemoryWorld())
    support, sales = two_agents(world)
    await support.session("s1").prompt("Where is my order?").accepted
    before = await world.read("s1", 0)
    assert before[0].data["agent"] == "support"  # the prompt names its agent
    with pytest.raises(WrongAgent) as refused:
        await sales.session("s1").prompt("Buy more!").accepted
    assert (refused.value.owner, refused.value.agent) == ("support", "sales")
    assert "'support'" in str(refused.value) and "'sales'" in str(refused.value)
    assert await world.read("s1", 0) == before  # nothing written
    await support.session("s1").prompt("And now?").accepted  # its own agent still may


async def test_two_agents_two_workers_on_one_memory_world_answer_only_their_own() -> None:
    world = MemoryWorld()
    support, sales = two_agents(world)
    mine = await prompt_all(support, N)
    theirs = await prompt_all(sales, N)
    started = time.monotonic()
    await asyncio.wait_for(
        asyncio.gather(
            support.work(until_idle=True, poll_interval=0.02),
            sales.work(until_idle=True, poll_interval=0.02),
        ),
        120,
    )
    print(f"\nmemory: {2 * N} sessions of two agents drained in {time.monotonic() - started:.2f} s")
    for sids, text in ((mine, "support answers"), (theirs, "sales answers")):
        for sid in sids:
            assert await answers(world, sid) == [text], sid
    assert await world.take_wake(lease=5) is None  # none left waiting


async def test_one_agents_worker_never_runs_another_agents_session() -> None:
    # only support works: sales' sessions are left as they were (no fence, no turn)
    world = MemoryWorld()
    support, sales = two_agents(world)
    theirs = await prompt_all(sales, 5)
    mine = await prompt_all(support, 5)
    await asyncio.wait_for(support.work(until_idle=True, poll_interval=0.02), 60)
    for sid in mine:
        assert await answers(world, sid) == ["support answers"]
    for sid in theirs:
        assert [e.kind for e in await world.read(sid, 0)] == [log.PROMPT]
    await asyncio.wait_for(sales.work(until_idle=True, poll_interval=0.02), 60)
    for sid in theirs:
        assert await answers(world, sid) == ["sales answers"]


async def test_a_wake_of_another_agent_handed_to_a_worker_is_handed_back_unrun() -> None:
    # a world whose take ignores the agent: the run's own check keeps the session
    world = BROKEN["take_returns_other_agents_wake"][0]()
    support, sales = two_agents(world)
    theirs = await prompt_all(sales, 3)
    await asyncio.wait_for(support.work(until_idle=True, deadline=1.0, poll_interval=0.02), 60)
    for sid in theirs:
        assert [e.kind for e in await world.read(sid, 0)] == [log.PROMPT]  # not even a fence
    await asyncio.wait_for(sales.work(until_idle=True, poll_interval=0.02), 60)
    for sid in theirs:
        assert await answers(world, sid) == ["sales answers"]


async def test_a_session_whose_log_names_its_agent_but_has_no_record_stays_that_agents() -> None:
    # prompted through a wrapper that kept no owner record: the log still says whose
    world = MemoryWorld()
    support, sales = two_agents(world)
    prompt = log.entry(log.PROMPT, text="Hi", key="k1", agent="support")
    await world.append("s1", [prompt], key="prompt:k1", wake=0.0)
    await asyncio.wait_for(sales.work(until_idle=True, deadline=1.0, poll_interval=0.02), 60)
    assert [e.kind for e in await world.read("s1", 0)] == [log.PROMPT]
    assert await world.owner("s1") == "support"  # claimed for the agent the log names
    await asyncio.wait_for(support.work(until_idle=True, poll_interval=0.02), 60)
    assert await answers(world, "s1") == ["support answers"]


async def test_a_world_without_the_seam_is_routed_by_the_fallback() -> None:
    world = HiddenSeam(MemoryWorld())
    assert not isinstance(world, AgentRouter)
    support, sales = two_agents(world)
    mine, theirs = await prompt_all(support, 10), await prompt_all(sales, 10)
    await asyncio.wait_for(
        asyncio.gather(
            support.work(until_idle=True, poll_interval=0.02),
            sales.work(until_idle=True, poll_interval=0.02),
        ),
        120,
    )
    for sids, text in ((mine, "support answers"), (theirs, "sales answers")):
        for sid in sids:
            assert await answers(world, sid) == [text], sid
    assert await world.take_wake(lease=5) is None


@pytest.mark.parametrize("where", ["memory", "sqlite", "postgres"])
async def test_a_rename_moves_an_agents_sessions_to_its_new_name(
    where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = {"memory": "memory://", "sqlite": f"sqlite:///{tmp_path}/world.db"}.get(where)
    world = open_world(url or request.getfixturevalue("pg_url"))
    try:
        old = Agent(ScriptedModel(["old answers"]), world=world, name="helpdesk")
        await old.session("s1").prompt("Hi").accepted
        assert await rename_agent(world, "helpdesk", "support") == 1
        new = Agent(ScriptedModel(["new answers", "new again"]), world=world, name="support")
        with pytest.raises(WrongAgent):
            await old.session("s1").prompt("Still me?").accepted
        await new.session("s1").prompt("Hi again").accepted
        await asyncio.wait_for(new.work(until_idle=True, poll_interval=0.02), 60)
        assert await answers(world, "s1") == ["new answers", "new again"]
    finally:
        await world.close()
    with pytest.raises(ConfigurationError, match="cannot rename"):
        await rename_agent(HiddenSeam(MemoryWorld()), "a", "b")


# -- worker processes -------------------------------------------------------------------


@pytest.fixture
def start_agent(engine_world_url: str, tmp_path: Path) -> Iterator[Any]:
    """Start ``routing_agents.py URL NAME`` (a worker of one agent) against the world."""
    procs: list[Proc] = []

    def start(name: str, *extra: str) -> Proc:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(REPO), env.get("PYTHONPATH", "")])
        out = tmp_path / f"{name}-{len(procs)}.log"
        with open(out, "wb") as f:
            popen = subprocess.Popen(
                [sys.executable, str(HERE / "routing_agents.py"), engine_world_url, name, *extra],
                stdout=f,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=tmp_path,
            )
        p = Proc(popen, out)
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.popen.poll() is None:
            p.popen.kill()
            p.popen.wait(10)


@pytest.mark.engine_worlds("sqlite", "postgres", "pgbouncer")
async def test_two_agents_in_two_worker_processes_answer_only_their_own(
    engine_world_url: str, engine_world_name: str, start_agent: Any
) -> None:
    world = fxworld.open_world(engine_world_url)
    try:
        support, sales = two_agents(world)
        mine, theirs = await prompt_all(support, N), await prompt_all(sales, N)
        started = time.monotonic()
        workers = [start_agent("support"), start_agent("sales")]
        left = set(mine + theirs)

        async def drained() -> bool:
            for sid in list(left):
                if await answers(world, sid):
                    left.discard(sid)
            return not left

        await wait_until_async(drained, 120)
        took = time.monotonic() - started
        print(f"\n{engine_world_name}: {2 * N} sessions, two worker processes: {took:.2f} s")
        for w in workers:
            w.signal(15)
        for w in workers:
            assert await w.wait() == 0, w.text()
        for sids, text in ((mine, "support answers"), (theirs, "sales answers")):
            for sid in sids:
                assert await answers(world, sid) == [text], sid
        assert await world.take_wake(lease=5) is None  # none left waiting
    finally:
        await world.close()


@pytest.mark.engine_worlds("sqlite", "postgres")
async def test_a_parent_and_its_child_on_other_agents_in_other_processes_both_finish(
    engine_world_url: str, start_agent: Any
) -> None:
    world = fxworld.open_world(engine_world_url)
    try:
        desk = Agent(ScriptedModel(["unused"]), world=world, name="desk")
        turn = desk.session("p1").prompt("When does it ship?")
        await turn.accepted
        desk_worker = start_agent("desk", "--own-only")  # runs no child session
        researcher_worker = start_agent("researcher")
        assert await asyncio.wait_for(turn, 60) == "desk says 3 May"
        parent = await world.read("p1", 0)
        (finished,) = [e.data for e in parent if e.kind == log.CHILD_FINISHED]
        assert finished["output"] == "researcher found 3 May"
        child = await world.read(finished["session"], 0)
        assert child[0].data["agent"] == "researcher"
        assert isinstance(world, AgentRouter)
        assert await world.owner(finished["session"]) == "researcher"
        for w in (desk_worker, researcher_worker):
            w.signal(15)
            assert await w.wait() == 0, w.text()
        taken = f"session {finished['session']}: taken"
        assert taken in researcher_worker.text()  # run by the researcher's worker
        assert taken not in desk_worker.text()
    finally:
        await world.close()
