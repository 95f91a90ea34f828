"""Pushes: one after every wake made durable, never failing the call; the URL
forms; HTTPPush against a real wake route; the tick."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from fxworld import Agent, MemoryWorld, open_world, tool
from fxworld.errors import ConfigurationError
from fxworld.push import (
    HTTPPush,
    PushingWorld,
    SQSPush,
    VercelQueuePush,
    message_body,
    push_from_url,
    session_of,
    tick,
)
from fxworld.testing import ScriptedModel
from fxworld.web import signed_headers, wake_handler
from tests.support.ports import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

SECRET = "test-secret-0123456789abcdef"


class Recorder:
    """A push that records what it was asked to send."""

    def __init__(self, fail: bool = False) -> None:
        self.sent: list[tuple[str, float]] = []
        self.fail = fail

    async def push(self, session_id: str, *, delay: float = 0.0) -> None:
        if self.fail:
            raise ConnectionError("the queue is down")
        self.sent.append((session_id, delay))

    async def close(self) -> None:
        pass


@tool(needs_approval=True)
def delete_account(id: str) -> str:
    """Needs a person."""
    return f"deleted {id}"


async def test_every_durable_wake_pushes_once() -> None:
    rec = Recorder()
    script = [{"tool": "delete_account", "input": {"id": "a"}}, "Deleted.", "Again."]
    agent = Agent(ScriptedModel(script), tools=[delete_account], world=MemoryWorld(), push=rec)
    s = agent.session()
    await s.create("Delete a")  # a prompt
    assert rec.sent == [(s.id, 0.0)]
    await agent.work(until_idle=True)  # parks on the approval: no wake, no push
    assert rec.sent == [(s.id, 0.0)]
    [pending] = await s.pending_approvals()
    await s.approve(pending.execution_id)  # an approval decided
    assert rec.sent[-1] == (s.id, 0.0) and len(rec.sent) == 2
    await agent.work(until_idle=True)
    await s.prompt("Again").accepted
    assert len(rec.sent) == 3
    await s.stop()  # a Stop: the prompt's wake is pending, and its message serves both
    assert len(rec.sent) == 3
    world = agent.world
    assert isinstance(world, PushingWorld) and world.stats.coalesced == 1
    await agent.work(until_idle=True)
    await world.wake(s.id, delay=5.0)  # wake(delay=)
    assert rec.sent[-1] == (s.id, 5.0) and len(rec.sent) == 4


async def test_a_push_that_fails_never_fails_the_prompt(caplog: pytest.LogCaptureFixture) -> None:
    agent = Agent(ScriptedModel(["Hi."]), world=MemoryWorld(), push=Recorder(fail=True))
    accepted = await agent.session().create("Hello")
    world = agent.world
    assert isinstance(world, PushingWorld)
    assert world.stats.failed == 1 and world.stats.sent == 0
    assert "the tick sends it again" in caplog.text
    taken = await world.inner.take_wake(lease=5.0)  # the wake is saved all the same
    assert taken is not None and taken.session_id == accepted.session_id


async def test_a_wake_appended_under_a_held_lease_is_pushed_once_the_lease_is_finished() -> None:
    rec = Recorder()
    world = PushingWorld(MemoryWorld(), rec)
    await world.inner.wake("s1")
    lease = await world.take_wake(lease=5.0)
    assert lease is not None
    await world.wake("s1")  # e.g. a turn yielding: a message now would find it leased
    assert rec.sent == []
    await world.finish_wake(lease)
    assert rec.sent == [("s1", 0.0)]


@pytest.fixture
async def route() -> AsyncIterator[tuple[str, Agent]]:
    agent = Agent(ScriptedModel(["Answered by the route."]), world=MemoryWorld())
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(wake_handler(agent, SECRET), host="127.0.0.1", port=port, log_level="error")
    )
    serving = asyncio.create_task(server.serve())
    for _ in range(1000):  # bounded: 10 s
        if server.started:
            break
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/", agent
    finally:
        server.should_exit = True
        await serving


async def test_http_push_is_signed_as_the_wake_route_checks(route: tuple[str, Agent]) -> None:
    url, served = route
    client = Agent(ScriptedModel([]), world=served.world, push=HTTPPush(url, SECRET, timeout=10))
    s = client.session()
    await s.create("Hi")
    world = client.world
    assert isinstance(world, PushingWorld)
    await world.drain()  # the push goes on beside the prompt
    events = [e.kind for e in await s.read()]
    assert events[-1] == "turn.finished"  # the route ran it; no worker did
    assert world.stats.sent == 1


async def test_http_push_with_a_wrong_secret_is_refused_and_counted(
    route: tuple[str, Agent],
) -> None:
    url, served = route
    push = HTTPPush(url, "another-secret-0123456789", timeout=10)
    client = Agent(ScriptedModel([]), world=served.world, push=push)
    s = client.session()
    await s.create("Hi")  # accepted all the same
    world = client.world
    assert isinstance(world, PushingWorld)
    await world.drain()
    assert world.stats.failed == 1
    assert [e.kind for e in await s.read()] == ["prompt"]  # the route ran nothing


def test_push_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    sqs = push_from_url("sqs+https://sqs.eu-west-1.amazonaws.com/123456789012/wakes")
    assert isinstance(sqs, SQSPush)
    assert sqs.queue_url == "https://sqs.eu-west-1.amazonaws.com/123456789012/wakes"
    local = push_from_url("sqs+http://127.0.0.1:4566/000000000000/q?region=us-east-1")
    assert isinstance(local, SQSPush) and local.queue_url == "http://127.0.0.1:4566/000000000000/q"
    vq = push_from_url("vercel-queue://fx-wakes")
    assert isinstance(vq, VercelQueuePush) and vq.topic == "fx-wakes"
    monkeypatch.delenv("FXWORLD_WAKE_SECRET", raising=False)
    with pytest.raises(ConfigurationError, match="FXWORLD_WAKE_SECRET"):
        push_from_url("https://example.invalid/api/wake")
    monkeypatch.setenv("FXWORLD_WAKE_SECRET", SECRET)
    assert isinstance(push_from_url("https://example.invalid/api/wake"), HTTPPush)
    assert SECRET not in repr(push_from_url("https://example.invalid/api/wake"))
    with pytest.raises(ConfigurationError, match="unknown push URL scheme"):
        push_from_url("kafka://broker/topic")
    with pytest.raises(ConfigurationError, match="topic"):
        VercelQueuePush("bad topic!")


async def test_fxworld_push_in_the_environment_makes_an_agent_push(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FXWORLD_PUSH", "vercel-queue://fx-wakes")
    agent = Agent(ScriptedModel([]), world=MemoryWorld())
    assert isinstance(agent.world, PushingWorld)
    assert agent.world is agent.world  # one wrapper: set up once
    monkeypatch.delenv("FXWORLD_PUSH")
    assert not isinstance(Agent(ScriptedModel([]), world=MemoryWorld()).world, PushingWorld)


async def test_the_tick_rings_for_overdue_unleased_wakes_only() -> None:
    world = MemoryWorld()
    rec = Recorder()
    for sid in ("due", "held", "later"):
        await world.wake(sid)
    await world.wake("later2", delay=60)
    held = await world.take_wake(lease=30.0)
    assert held is not None
    assert await tick(world, rec, overdue=0.0) == 2
    assert sorted(s for s, _ in rec.sent) == sorted({"due", "held", "later"} - {held.session_id})
    assert await tick(world, Recorder(), overdue=0.0, limit=1) == 1
    assert await tick(world, Recorder(), overdue=3600.0) == 0  # none overdue that long


async def test_a_prompt_over_http_pushes() -> None:
    import httpx

    from fxworld.web import create_app

    rec = Recorder()
    agent = Agent(ScriptedModel(["Hi."]), world=MemoryWorld(), push=rec)
    app = create_app(agent, allow_anyone=True)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        r = await c.post("/sessions", json={"text": "Hello"})
    assert r.status_code == 202
    assert rec.sent == [(r.json()["session_id"], 0.0)]


@tool(needs_approval=True, approval_timeout=60.0)
def wire_money(to: str) -> str:
    """Needs a person within a minute."""
    return f"sent to {to}"


async def test_an_approval_timeout_is_pushed_with_its_delay_once_the_run_hands_back() -> None:
    rec = Recorder()
    script = [{"tool": "wire_money", "input": {"to": "B"}}, "Done."]
    agent = Agent(ScriptedModel(script), tools=[wire_money], world=MemoryWorld(), push=rec)
    s = agent.session()
    await s.create("Pay B")
    await agent.work(until_idle=True)  # parks; the timeout's wake lands with the request
    assert rec.sent[0] == (s.id, 0.0)
    assert len(rec.sent) == 2 and rec.sent[1][0] == s.id and 59.0 <= rec.sent[1][1] <= 60.0


def test_the_tick_command_sends_a_message_per_overdue_wake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fxworld.cli import main

    url = f"sqlite:///{tmp_path / 'w.db'}"

    async def due() -> None:
        w = open_world(url)
        await w.setup()
        await w.wake("s-1")
        await w.close()

    asyncio.run(due())
    monkeypatch.setenv("FXWORLD_WAKE_SECRET", SECRET)
    # nobody listens on port 9: the push fails, and the command says so in one line
    assert main(["tick", "--world", url, "--push", "http://127.0.0.1:9/", "--overdue", "0"]) == 2
    assert "fxworld tick: the push failed: URLError" in capsys.readouterr().err
    assert main(["tick", "--world", url, "--push", "vercel-queue://t", "--overdue", "3600"]) == 0
    assert "tick: 0 messages sent" in capsys.readouterr().out


async def test_a_lease_that_ran_out_unfinished_holds_no_push_back() -> None:
    rec = Recorder()
    world = PushingWorld(MemoryWorld(), rec)
    await world.inner.wake("s1")
    lease = await world.take_wake(lease=0.05)  # its run dies: never finished
    assert lease is not None
    await wait_until(lambda: datetime.now(UTC) > lease.expires_at, 10)  # the lease ran out
    await world.wake("s1")  # a prompt later, in the same process
    assert rec.sent == [("s1", 0.0)]


def test_a_bad_push_url_fails_when_the_agent_is_built() -> None:
    with pytest.raises(ConfigurationError, match="unknown push URL scheme"):
        Agent(ScriptedModel([]), world=MemoryWorld(), push="kafka://broker/topic")


@tool(idempotent=True)
async def slow_step(n: int) -> str:
    """Takes 0.6 s."""
    await asyncio.sleep(0.6)
    return f"step {n} done"


def two_step_agent(push: Recorder) -> Agent:
    """A turn of two 0.6 s tool runs: with 1 s to run, each invocation fits one."""
    script: list[Any] = [{"tool": "slow_step", "input": {"n": n}} for n in (1, 2)] + ["Done."]
    return Agent(ScriptedModel(script), tools=[slow_step], world=MemoryWorld(), push=push)


async def test_a_turn_that_yields_goes_on_with_one_message_per_invocation() -> None:
    """The yield's own push continues the turn; the delivery that started the run
    is settled (200 "yielded"), not asked again beside it: a turn that yields twice
    costs three messages, each delivered once."""
    rec = Recorder()
    agent = two_step_agent(rec)
    handler = wake_handler(agent, secret=SECRET, time_limit=1.5, margin=0.5)
    sid = (await agent.session().create("Go")).session_id
    answers = []
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=handler), base_url="http://test"
    ) as client:
        for _ in range(10):  # the queue: every message is delivered, once unless asked again
            if not rec.sent:
                break
            body = message_body(rec.sent.pop(0)[0])
            r = await client.post("/", content=body, headers=signed_headers(SECRET, body))
            answers.append((r.status_code, r.json()["status"]))
            if r.status_code == 503:  # retryable: the queue delivers it again
                rec.sent.append((sid, 0.0))
    log = [e.kind for e in await agent.session(sid).read()]
    yields = log.count("turn.yielded")
    assert yields >= 2 and log[-1] == "turn.finished"
    assert answers == [(200, "yielded")] * yields + [(200, "done")]
    assert len(answers) == 1 + yields  # one delivery per invocation the turn needed


async def test_a_yield_whose_push_failed_keeps_its_delivery() -> None:
    rec = Recorder()
    agent = two_step_agent(rec)
    handler = wake_handler(agent, secret=SECRET, time_limit=1.5, margin=0.5)
    sid = (await agent.session().create("Go")).session_id
    rec.fail = True  # the queue is down when the turn yields
    body = message_body(sid)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=handler), base_url="http://test"
    ) as client:
        r = await client.post("/", content=body, headers=signed_headers(SECRET, body))
    assert "turn.yielded" in [e.kind for e in await agent.session(sid).read()]
    assert (r.status_code, r.json()["status"]) == (503, "deadline")  # delivered again


def test_two_messages_for_one_session_in_one_second_are_not_one_signature() -> None:
    # the wake route refuses a signature it has seen (a replay): a turn's second
    # continuation, pushed within the second of the first, must not look like it
    first, second = message_body("s-1"), message_body("s-1")
    assert first != second
    assert signed_headers(SECRET, first) != signed_headers(SECRET, second)
    assert session_of(first) == session_of(second) == "s-1"
