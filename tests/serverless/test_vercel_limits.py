"""Vercel Queues deliveries at the wake route, against the ``vercel-queue`` SDK's
embedded dev server (issue 43 item 15): deliveries count against ``max_runs``, and
a queue service that fails while a delivery is verified gets a retryable answer,
never the final 403."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from fxworld import Agent, MemoryWorld, tool
from fxworld.localqueues.vercel import CONSUMER, DEPLOYMENT
from fxworld.push import VercelQueuePush
from fxworld.testing import ScriptedModel
from fxworld.web import WakeHandler
from tests.serverless.deployments import LEASE, vercel_env
from tests.support.waiting import wait_until

pytest.importorskip("vercel.queue")
from vercel.queue.devserver import embedded_queue_dev_server

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def dev() -> Iterator[Any]:
    with embedded_queue_dev_server(manual_clock=False) as server:
        yield server


@pytest.fixture(autouse=True)
def env(dev: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in vercel_env(dev).items():
        monkeypatch.setenv(k, v)


async def _deliveries(dev: Any, sids: list[str]) -> list[Any]:
    topic = f"limits-{uuid.uuid4().hex[:12]}"  # this test's own
    push = VercelQueuePush(topic)
    for sid in sids:
        await push.push(sid)
    return list(
        dev.app.iter_push_deliveries(topic, CONSUMER, lease_seconds=30, deployment=DEPLOYMENT)
    )


@tool(idempotent=True)
async def look(n: int) -> str:
    """A quick look."""
    return f"looked {n}"


async def test_deliveries_at_once_run_at_most_max_runs_at_a_time(dev: Any) -> None:
    script: list[Any] = [{"tool": "look", "input": {"n": 1}}, "Ran."]
    agent = Agent(ScriptedModel(script), tools=[look], world=MemoryWorld())
    sids = [(await agent.session().create("Hi")).session_id for _ in range(12)]
    deliveries = await _deliveries(dev, sids)
    assert len(deliveries) == 12
    handler = WakeHandler(agent, vercel=True, time_limit=20, margin=1, lease=LEASE, max_runs=2)
    work = agent.work
    running, most, answered = 0, 0, 0
    gate = asyncio.Event()  # runs hold here until every delivery ran or was turned away

    async def counted(**kwargs: Any) -> Any:
        nonlocal running, most
        running += 1
        most = max(most, running)
        try:
            await gate.wait()
            return await work(**kwargs)
        finally:
            running -= 1

    agent.work = counted  # type: ignore[method-assign]

    async def post(c: httpx.AsyncClient, d: Any) -> httpx.Response:
        nonlocal answered
        try:
            return await c.post("/", content=d.body, headers=d.headers)
        finally:
            answered += 1

    transport = httpx.ASGITransport(app=handler)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=30) as c:
        posts = [asyncio.create_task(post(c, d)) for d in deliveries]
        await wait_until(lambda: running + answered == 12, 30)
        gate.set()
        answers = await asyncio.gather(*posts)
    assert most == 2  # 12 deliveries at once: never more than max_runs runs
    statuses = [r.json().get("status") or r.json().get("error") for r in answers]
    assert all(r.status_code == 200 for r in answers)  # each settled with the queue
    assert statuses.count("busy") == 10  # asked again in a second
    ends = [[e.kind for e in await agent.session(s).read()][-1] for s in sids]
    assert ends == ["turn.finished"] * 12  # the two runs took every due session


class Failing:
    """A queue service that answers every request 500 (an outage), on a real socket."""

    def __init__(self) -> None:
        self.asked = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if length:
            await reader.readexactly(length)
        self.asked += 1
        body = b"upstream failure"
        writer.write(
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
        )
        await writer.drain()
        writer.close()


@pytest.fixture
async def failing() -> AsyncIterator[tuple[str, Failing]]:
    service = Failing()
    server = await asyncio.start_server(service.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", service
    finally:
        server.close()
        await server.wait_closed()


async def test_a_queue_service_failing_during_verification_is_answered_503_then_runs(
    dev: Any, failing: tuple[str, Failing], monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = Agent(ScriptedModel(["Ran."]), world=MemoryWorld())
    sid = (await agent.session().create("Hi")).session_id
    [delivery] = await _deliveries(dev, [sid])
    url, service = failing
    handler = WakeHandler(agent, vercel=True, time_limit=10, margin=1, lease=LEASE)
    transport = httpx.ASGITransport(app=handler)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        monkeypatch.setenv("VERCEL_QUEUE_BASE_URL", url)  # the service answers 500
        r = await c.post("/", content=delivery.body, headers=delivery.headers)
        assert service.asked >= 1
        assert r.status_code == 503, r.text  # retryable: the queue delivers it again
        assert r.json()["error"] == "queue_unavailable" and r.headers["retry-after"] == "1"
        assert [e.kind for e in await agent.session(sid).read()] == ["prompt"]  # ran nothing
        monkeypatch.setenv("VERCEL_QUEUE_BASE_URL", dev.base_url)  # the service is back
        r = await c.post("/", content=delivery.body, headers=delivery.headers)
    assert r.status_code == 200 and r.json()["status"] == "done"
