"""Vercel Queues: the ``vercel-queue`` SDK's embedded dev server, the wake route in
its own uvicorn process, and what the platform does between them
(``vercel_platform.py``). The scenarios of docs/serverless.md, and each refusal."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fxworld import Agent, MemoryWorld
from fxworld.localqueues.vercel import CONSUMER, DEPLOYMENT, TOPIC, Platform
from fxworld.push import PushingWorld, VercelQueuePush, tick
from fxworld.testing import ScriptedModel
from fxworld.web import WakeHandler

REPO = Path(__file__).resolve().parents[2]

vercel_queue = pytest.importorskip("vercel.queue")
from vercel.queue.devserver import embedded_queue_dev_server  # noqa: E402

LEASE = 2


@pytest.fixture(scope="module")
def dev() -> Iterator[Any]:
    with embedded_queue_dev_server(manual_clock=False) as server:
        yield server


def queue_env(dev: Any, deployment: str = DEPLOYMENT) -> dict[str, str]:
    return {
        "VERCEL_QUEUE_BASE_URL": dev.base_url,
        "VERCEL_QUEUE_TOKEN": "local-token",
        "VERCEL_REGION": "iad1",
        "VERCEL_DEPLOYMENT_ID": deployment,
    }


@pytest.fixture(autouse=True)
def env(dev: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in queue_env(dev).items():
        monkeypatch.setenv(k, v)


class Deployment:
    def __init__(self, dev: Any, tmp: Path, script: str, **env: str) -> None:
        self.tmp = tmp
        self.url = f"sqlite:///{tmp / 'world.db'}"
        self.env = {
            "FXWORLD_URL": self.url,
            "FXWORLD_PUSH": f"vercel-queue://{TOPIC}",
            "TEST_DIR": str(tmp),
            "TEST_SCRIPT": script,
            "FXWORLD_AGENT": "tests.serverless.app:agent",
            **env,
        }
        self.platform = Platform(
            dev,
            self.env,
            time_limit=float(env.get("TIME_LIMIT", "8")),
            lease=LEASE,
            log=tmp / "route.log",
        )
        self.client = Agent(ScriptedModel([]), world=self.url, push=VercelQueuePush(TOPIC))

    def heard(self) -> list[str]:
        texts = []
        for line in (self.tmp / "model.jsonl").read_text().splitlines():
            for m in json.loads(line)["messages"]:
                if m.get("role") == "tool":
                    texts.append(json.dumps(m))
        return texts

    async def answer(self, session_id: str, cursor: str, within: float = 60) -> list[str]:
        kinds: list[str] = []

        async def read() -> None:
            async for e in self.client.session(session_id).stream(cursor, until="turn"):
                kinds.append(e.kind)
                if e.kind == "turn.finished":
                    kinds.append(e.data["text"])

        await asyncio.wait_for(read(), within)
        return kinds


@pytest.fixture
async def deploy(dev: Any, tmp_path: Path) -> AsyncIterator[Any]:
    # (no dev.reset(): it stops the server's clock. A message an earlier test left
    # on the topic names a session this world does not hold: it runs nothing.)
    made: list[Deployment] = []

    def make(script: str, **env: str) -> Deployment:
        d = Deployment(dev, tmp_path, script, **env)
        made.append(d)
        return d

    yield make
    for d in made:
        await asyncio.to_thread(d.platform.stop)
        await d.client.world.close()


async def test_a_prompt_runs_to_its_answer_with_no_worker(deploy: Any) -> None:
    d = deploy("hello")
    d.platform.start()
    accepted = await d.client.session().create("Hi")
    kinds = await d.answer(accepted.session_id, accepted.cursor)
    assert kinds[-2:] == ["turn.finished", "Hello from a function."]
    assert d.platform.invocations >= 1


async def test_a_function_killed_mid_tool_continues_after_redelivery_tool_not_rerun(
    deploy: Any,
) -> None:
    d = deploy("refund", TEST_KILL_IN_TOOL="1")
    d.platform.start()
    accepted = await d.client.session().create("Refund o-1")
    kinds = await d.answer(accepted.session_id, accepted.cursor)
    assert kinds[-1] == "Checked; all good."
    assert d.platform.crashed >= 1
    assert (d.tmp / "refund-o-1").read_text().count("x") == 1
    assert any("may have partly run" in h for h in d.heard())


async def test_a_turn_three_times_the_time_limit_finishes_over_several_invocations(
    deploy: Any,
) -> None:
    d = deploy("long", TEST_STEP_SECONDS="1.2", TIME_LIMIT="4")
    d.platform.start()
    accepted = await d.client.session().create("Go long")
    kinds = await d.answer(accepted.session_id, accepted.cursor, within=120)
    assert kinds[-1] == "Long turn over."
    assert kinds.count("turn.yielded") >= 2
    assert kinds.count("turn.finished") == 1


async def test_a_push_that_failed_is_recovered_by_the_tick(
    deploy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = deploy("hello")
    monkeypatch.setenv("VERCEL_QUEUE_BASE_URL", "http://127.0.0.1:9")  # the queue is down
    broken = Agent(ScriptedModel([]), world=d.url, push=VercelQueuePush(TOPIC))
    accepted = await broken.session().create("Hi")  # accepted all the same
    assert isinstance(broken.world, PushingWorld) and broken.world.stats.failed == 1
    await broken.world.close()
    monkeypatch.undo()
    for k, v in queue_env(d.platform.dev).items():
        monkeypatch.setenv(k, v)
    d.platform.start()
    push = VercelQueuePush(TOPIC)
    assert await tick(d.client.world, push, overdue=0.0) == 1
    kinds = await d.answer(accepted.session_id, accepted.cursor)
    assert kinds[-1] == "Hello from a function."


async def test_fifty_sessions_prompted_at_once_all_finish_none_twice(deploy: Any) -> None:
    d = deploy("hello")
    d.platform.start()
    made = await asyncio.gather(*(d.client.session().create("Hi") for _ in range(50)))
    ends = await asyncio.gather(*(d.answer(a.session_id, a.cursor, 120) for a in made))
    assert all(k[-1] == "Hello from a function." for k in ends)
    for a in made:
        events = await d.client.session(a.session_id).read()
        assert [e.kind for e in events].count("turn.finished") == 1


async def test_an_approval_decided_from_another_process_pushes_and_resumes(deploy: Any) -> None:
    d = deploy("approve")
    d.platform.start()
    accepted = await d.client.session().create("Delete a-1")
    s = d.client.session(accepted.session_id)
    pending = []
    for _ in range(300):
        pending = await s.pending_approvals()
        if pending:
            break
        await asyncio.sleep(0.1)
    assert pending
    env = {**os.environ, **d.env}
    await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "fxworld.cli", "sessions", "approve", accepted.session_id,
         pending[0].execution_id, "--world", d.url],
        cwd=REPO, env=env, check=True, timeout=60,
    )  # fmt: skip
    kinds = await d.answer(accepted.session_id, accepted.cursor)
    assert kinds[-1] == "Deleted."
    assert (d.tmp / "delete-a-1").read_text().count("x") == 1


# -- refusals: only the queue starts a turn ------------------------------------------


async def _route(agent: Agent) -> httpx.AsyncClient:
    handler = WakeHandler(agent, vercel=True, time_limit=10, margin=1, lease=LEASE)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=handler), base_url="http://t")


async def _delivery(dev: Any, sid: str) -> Any:
    topic = f"refusals-{uuid.uuid4().hex[:12]}"  # this test's own
    await VercelQueuePush(topic).push(sid)
    [got] = list(
        dev.app.iter_push_deliveries(topic, CONSUMER, lease_seconds=30, deployment=DEPLOYMENT)
    )
    return got


@pytest.fixture
async def waiting(dev: Any) -> tuple[Agent, str]:
    agent = Agent(ScriptedModel(["Ran."]), world=MemoryWorld())
    s = agent.session()
    await s.create("Hi")  # a wake is due: a delivery that is let in runs it
    return agent, s.id


async def _ran(agent: Agent, sid: str) -> bool:
    return "turn.finished" in [e.kind for e in await agent.session(sid).read()]


async def test_a_real_delivery_runs_and_is_acknowledged(dev: Any, waiting: Any) -> None:
    agent, sid = waiting
    delivery = await _delivery(dev, sid)
    async with await _route(agent) as c:
        r = await c.post("/", content=delivery.body, headers=delivery.headers)
    assert r.status_code == 200 and r.json()["status"] == "done"
    assert await _ran(agent, sid)


async def test_an_unsigned_request_is_refused_and_runs_nothing(waiting: Any) -> None:
    agent, sid = waiting
    async with await _route(agent) as c:
        r = await c.post("/", json={"session_id": sid})
    assert r.status_code == 401 and not await _ran(agent, sid)


async def test_a_forged_delivery_is_refused_and_runs_nothing(dev: Any, waiting: Any) -> None:
    agent, sid = waiting
    delivery = await _delivery(dev, sid)
    forged = {**delivery.headers, "ce-vqsreceipthandle": "forged-receipt-handle"}
    async with await _route(agent) as c:
        r = await c.post("/", content=delivery.body, headers=forged)
    assert r.status_code == 403 and not await _ran(agent, sid)


async def test_a_malformed_delivery_is_refused_and_runs_nothing(waiting: Any) -> None:
    agent, sid = waiting
    headers = {"ce-type": "com.vercel.queue.v2beta", "ce-vqsqueuename": TOPIC}
    async with await _route(agent) as c:
        r = await c.post("/", json={"session_id": sid}, headers=headers)
    assert r.status_code == 400 and not await _ran(agent, sid)


async def test_a_replayed_delivery_is_refused_and_runs_nothing(dev: Any, waiting: Any) -> None:
    agent, sid = waiting
    delivery = await _delivery(dev, sid)
    async with await _route(agent) as c:
        assert (await c.post("/", content=delivery.body, headers=delivery.headers)).is_success
        await agent.session(sid).prompt("Again").accepted  # due again: a replay would run it
        r = await c.post("/", content=delivery.body, headers=delivery.headers)
    assert r.status_code == 403
    assert [e.kind for e in await agent.session(sid).read()].count("turn.finished") == 1


async def test_a_delivery_for_another_deployment_is_refused_and_runs_nothing(
    dev: Any, waiting: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, sid = waiting
    delivery = await _delivery(dev, sid)
    monkeypatch.setenv("VERCEL_DEPLOYMENT_ID", "dpl_another_deployment")
    async with await _route(agent) as c:
        r = await c.post("/", content=delivery.body, headers=delivery.headers)
    assert r.status_code == 403 and not await _ran(agent, sid)
