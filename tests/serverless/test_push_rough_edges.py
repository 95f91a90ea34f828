"""The smaller serverless rough edges (issue 43 item 15): credentials in a push's
repr, ``fxworld tick`` with the queue down, long delays on Vercel Queues, FIFO
queues on SQS. Real servers: the ``vercel-queue`` SDK's dev server, moto's SQS
server, and a port nobody listens on."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fxworld import Agent, MemoryWorld, open_world
from fxworld.commands.serve import describe_world
from fxworld.push import HTTPPush, PushingWorld, session_of
from fxworld.testing import ScriptedModel
from tests.serverless.deployments import vercel_env

pytestmark = pytest.mark.timeout(60)

SECRET = "test-secret-0123456789abcdef"


async def test_a_push_url_s_credentials_never_show_in_a_repr_or_a_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = "http://wakes:hunter2-password@127.0.0.1:9/fxworld"  # nobody listens on 9
    push = HTTPPush(url, SECRET)
    agent = Agent(ScriptedModel([]), world=MemoryWorld(), push=push)
    world = agent.world
    assert isinstance(world, PushingWorld)
    shown = [repr(push), str(push), repr(world), describe_world(world)]  # the ready line's
    assert all("hunter2" not in s for s in shown), shown
    assert "wakes:***@127.0.0.1:9/fxworld" in repr(push)
    with caplog.at_level(logging.WARNING, "fxworld.push"):
        await agent.session().create("Hi")
        await world.drain()
    assert world.stats.failed == 1 and "hunter2" not in caplog.text


def _overdue_world(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'w.db'}"

    async def due() -> None:
        w = open_world(url)
        await w.setup()
        await w.wake("s-1")
        await w.close()

    asyncio.run(due())
    return url


def test_the_tick_with_sqs_down_says_so_in_one_line_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fxworld.cli import main

    for k, v in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # (no retries: the test stays short)
    url = _overdue_world(tmp_path)
    queue = "sqs+http://127.0.0.1:9/000000000000/wakes?region=us-east-1"  # nobody on 9
    assert main(["tick", "--world", url, "--push", queue, "--overdue", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fxworld tick: the push failed: EndpointConnectionError")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.fixture(scope="module")
def dev() -> Iterator[Any]:
    pytest.importorskip("vercel.queue")
    from vercel.queue.devserver import embedded_queue_dev_server

    with embedded_queue_dev_server(manual_clock=False) as server:
        yield server


async def test_a_wake_due_in_more_than_a_day_is_sent_with_the_queue_s_longest_delay(
    dev: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vercel.queue import QueueClient

    from fxworld.push import VERCEL_MAX_DELAY, VercelQueuePush

    for k, v in vercel_env(dev).items():
        monkeypatch.setenv(k, v)
    topic = f"later-{uuid.uuid4().hex[:12]}"
    rec = PushingWorld(MemoryWorld(), VercelQueuePush(topic, client=QueueClient()))
    await rec.wake("s-later", delay=3 * 86_400.0)  # an approval due in three days
    await rec.drain()
    assert rec.stats.failed == 0 and rec.stats.sent == 1  # the queue took it
    [message] = [m for m in dev.app.state.messages if m.topic == topic]
    assert message.delay_seconds == VERCEL_MAX_DELAY


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("moto")
    from fxworld.localqueues.sqs import MotoServer

    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_sqs_push_to_a_fifo_queue_groups_by_session(
    moto: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fxworld.localqueues.sqs import CREDENTIALS
    from fxworld.push import SQSPush

    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    sqs = moto.client()
    url = sqs.create_queue(QueueName="wakes.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    push = SQSPush(url)
    for sid in ("s-1", "s-1", "s-2"):  # two pushes for one session are two messages
        await push.push(sid)
    await push.push("s-3", delay=60.0)  # no delay per message: left to the tick
    await push.close()
    got = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["MessageGroupId"]
    )["Messages"]
    groups = sorted(m["Attributes"]["MessageGroupId"] for m in got)
    assert groups in (["s-1", "s-2"], ["s-1", "s-1", "s-2"])  # a group's next waits its turn
    assert all(session_of(m["Body"]) == m["Attributes"]["MessageGroupId"] for m in got)
