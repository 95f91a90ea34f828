"""One message per continuation: a turn that yields at the time limit goes on with
the message its yield pushed, and the delivery that ran up to the yield is settled
(SQS: deleted, not listed in ``batchItemFailures``; Vercel: acknowledged, not
retried), so a turn that yields twice costs three messages, each delivered once.

The function runs in this process (no process start to eat its time, no time
limit enforced by killing it), so the counts depend on nothing but the consumers:
SQS on moto's server with the handler invoked as an event source mapping does
(receive, invoke, delete what is not listed), Vercel Queues on the SDK's dev
server with each push delivery posted to the wake route."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from fxworld import Agent, tool
from fxworld.testing import ScriptedModel

pytest.importorskip("moto")
pytest.importorskip("vercel.queue")

from fxworld.aws import lambda_handler
from fxworld.localqueues.sqs import CREDENTIALS, MotoServer
from fxworld.localqueues.vercel import CONSUMER, DEPLOYMENT
from fxworld.push import PushingWorld, SQSPush, VercelQueuePush
from fxworld.web import WakeHandler
from tests.serverless.deployments import vercel_env

pytestmark = pytest.mark.timeout(120)

VISIBILITY = 2  # the queue's visibility timeout / delivery lease, and the wake's lease


@tool(idempotent=True)
async def slow_step(n: int) -> str:
    """Takes 0.6 s."""
    await asyncio.sleep(0.6)
    return f"step {n} done"


def agent(url: str, push: Any) -> Agent:
    """A turn of two 0.6 s tool runs then an answer: with 1.1 s to run (a 1.6 s
    time limit less a 0.5 s margin), each invocation fits one tool run."""
    script: list[Any] = [{"tool": "slow_step", "input": {"n": n}} for n in (1, 2)] + ["Done."]
    return Agent(ScriptedModel(script), tools=[slow_step], world=url, push=push)


async def finished(client: Agent, sid: str) -> list[str]:
    return [e.kind for e in await client.session(sid).read()]


class Context:
    """What Lambda passes: 1.6 s left, always."""

    def get_remaining_time_in_millis(self) -> int:
        return 1600


@pytest.fixture
def moto(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoServer]:
    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    server = MotoServer(tmp_path / "moto.log")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def dev(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from vercel.queue.devserver import embedded_queue_dev_server

    with embedded_queue_dev_server(manual_clock=False) as server:
        for k, v in vercel_env(server).items():
            monkeypatch.setenv(k, v)
        yield server


@pytest.fixture
def url(tmp_path: Path) -> str:
    """The world every process of the deployment shares."""
    return f"sqlite:///{tmp_path / 'world.db'}"


async def test_sqs_a_turn_that_yields_twice_costs_three_messages(
    moto: MotoServer, url: str
) -> None:
    queue = moto.queue(f"q-{uuid.uuid4().hex[:12]}", visibility=VISIBILITY)
    sqs = moto.client()
    handler = lambda_handler(agent(url, SQSPush(queue)), margin=0.5, lease=VISIBILITY)
    prompter = Agent(ScriptedModel([]), world=url, push=SQSPush(queue))
    sid = (await prompter.session().create("Go")).session_id
    assert isinstance(prompter.world, PushingWorld)
    await prompter.world.drain()  # the prompt's push goes on beside it: sent now
    deliveries = 0
    with ThreadPoolExecutor(max_workers=1) as function:  # one warm execution environment
        loop = asyncio.get_running_loop()
        for _ in range(200):  # bounded: until the queue is empty, invisible messages too
            got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=0)
            messages = got.get("Messages") or []
            if not messages:
                if not moto.holds_messages(queue):
                    break
                await asyncio.sleep(0.2)
                continue
            deliveries += len(messages)
            event = {
                "Records": [
                    {"messageId": m["MessageId"], "body": m["Body"], "eventSource": "aws:sqs"}
                    for m in messages
                ]
            }
            answer = await loop.run_in_executor(function, handler, event, Context())
            listed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
            for m in messages:
                if m["MessageId"] not in listed:
                    sqs.delete_message(QueueUrl=queue, ReceiptHandle=m["ReceiptHandle"])
    log = await finished(prompter, sid)
    await prompter.world.close()
    assert log[-1] == "turn.finished" and log.count("turn.yielded") == 2
    assert deliveries == 3


async def test_vercel_a_turn_that_yields_twice_costs_three_messages(dev: Any, url: str) -> None:
    topic = f"t-{uuid.uuid4().hex[:12]}"
    route = WakeHandler(
        agent(url, VercelQueuePush(topic)),
        vercel=True,
        time_limit=1.6,
        margin=0.5,
        lease=VISIBILITY,
    )
    prompter = Agent(ScriptedModel([]), world=url, push=VercelQueuePush(topic))
    sid = (await prompter.session().create("Go")).session_id
    deliveries = 0
    quiet_since = time.monotonic()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=route), base_url="http://route"
    ) as http:
        for _ in range(400):  # bounded: until the turn is over and nothing came for 2.5 s
            got = list(
                dev.app.iter_push_deliveries(
                    topic, CONSUMER, lease_seconds=VISIBILITY, deployment=DEPLOYMENT
                )
            )
            for delivery in got:
                deliveries += 1
                r = await http.post("/", content=delivery.body, headers=delivery.headers)
                assert r.status_code == 200
            if got:
                quiet_since = time.monotonic()
            elif "turn.finished" in await finished(prompter, sid):
                if time.monotonic() - quiet_since > VISIBILITY + 0.5:
                    break  # past a lease and a retry: nothing is coming back
            await asyncio.sleep(0.05)
    log = await finished(prompter, sid)
    await prompter.world.close()
    await route.agent.world.close()
    assert log[-1] == "turn.finished" and log.count("turn.yielded") == 2
    assert deliveries == 3
