"""Only the queue starts a turn: Vercel Queues deliveries at the wake route, checked
by the ``vercel-queue`` SDK's embedded dev server; each refusal runs nothing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fxworld import Agent, MemoryWorld
from fxworld.localqueues.vercel import CONSUMER, DEPLOYMENT, TOPIC
from fxworld.push import VercelQueuePush
from fxworld.testing import ScriptedModel
from fxworld.web import WakeHandler
from tests.serverless.deployments import LEASE, vercel_env

pytest.importorskip("vercel.queue")
from vercel.queue.devserver import embedded_queue_dev_server


@pytest.fixture(scope="module")
def dev() -> Iterator[Any]:
    with embedded_queue_dev_server(manual_clock=False) as server:
        yield server


@pytest.fixture(autouse=True)
def env(dev: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in vercel_env(dev).items():
        monkeypatch.setenv(k, v)


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


async def test_a_delivery_with_a_malformed_header_is_refused_and_runs_nothing(
    dev: Any, waiting: Any
) -> None:
    """The headers are read into the SDK's public ``MessageMetadata`` here; one
    that is not what Vercel sends (an instant that is not one, a consumer group
    that is not a queue name) is 400 before the queue is asked anything."""
    agent, sid = waiting
    delivery = await _delivery(dev, sid)
    async with await _route(agent) as c:
        for name, bad in (("ce-vqscreatedat", "yesterday"), ("ce-vqsconsumergroup", "a b")):
            headers = {**delivery.headers, name: bad}
            r = await c.post("/", content=delivery.body, headers=headers)
            assert r.status_code == 400, (name, r.text)
    assert not await _ran(agent, sid)
    async with await _route(agent) as c:  # the real one is still leased to this route
        r = await c.post("/", content=delivery.body, headers=delivery.headers)
    assert r.status_code == 200 and await _ran(agent, sid)


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
