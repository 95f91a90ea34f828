"""A hung or refusing queue never holds a prompt (issue 43 item 12): the prompt is
acknowledged once durable, the push goes on beside it, bounded by the push timeout,
and a push that fails or hangs loses no turn. Real sockets on 127.0.0.1: an
endpoint that accepts and never answers, and a port that refuses connections.

Finding: with an endpoint that accepted and never answered, ``prompt()`` took
309.5 s (HTTP: 2 s, its timeout); with SQS refusing connections, 6 to 10 s."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from fxworld import Agent, MemoryWorld
from fxworld.errors import ConfigurationError
from fxworld.push import HTTPPush, PushingWorld, SQSPush
from fxworld.testing import ScriptedModel
from tests.support.ports import free_port

pytestmark = pytest.mark.timeout(60)

SECRET = "test-secret-0123456789abcdef"


class NeverAnswers:
    """An HTTP endpoint that takes each request and never answers it."""

    def __init__(self) -> None:
        self.received = asyncio.Event()
        self.given_up = 0  # requests whose client closed the connection
        self.writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        await reader.readuntil(b"\r\n\r\n")
        self.received.set()
        while await reader.read(65536):  # (the body) until the client gives up
            pass
        self.given_up += 1


@pytest.fixture
async def never_answers() -> AsyncIterator[tuple[str, NeverAnswers]]:
    endpoint = NeverAnswers()
    server = await asyncio.start_server(endpoint.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/wake", endpoint
    finally:
        for w in endpoint.writers:  # the client's thread then ends at once
            w.close()
        server.close()
        await server.wait_closed()


async def test_a_prompt_is_accepted_while_the_queue_still_holds_its_push(
    never_answers: tuple[str, NeverAnswers], caplog: pytest.LogCaptureFixture
) -> None:
    url, endpoint = never_answers
    world = PushingWorld(MemoryWorld(), HTTPPush(url, SECRET, timeout=10), timeout=1.0)
    agent = Agent(ScriptedModel(["Hi."]), world=world)
    turn = agent.session().prompt("Hello")
    await turn.accepted
    assert world.stats.sent == world.stats.failed == 0  # acknowledged, the push in flight
    await endpoint.received.wait()
    assert endpoint.given_up == 0  # the endpoint holds the request: nothing waited for it
    assert world.stats.sent == world.stats.failed == 0

    await agent.work(until_idle=True)  # the turn is not lost: the wake is saved
    assert await turn == "Hi."
    # and the push's time is bounded: work() waited for it, and it was given up
    assert world.stats.failed == 1 and world.stats.sent == 0
    assert "no answer within 1 s" in caplog.text and "the tick sends it again" in caplog.text
    assert endpoint.given_up == 0  # given up by the world, the endpoint holding it still


async def test_close_waits_only_for_the_bounded_push(
    never_answers: tuple[str, NeverAnswers],
) -> None:
    url, endpoint = never_answers
    world = PushingWorld(MemoryWorld(), HTTPPush(url, SECRET, timeout=10), timeout=0.5)
    accepted = await Agent(ScriptedModel([]), world=world).session().create("Hello")
    await endpoint.received.wait()
    await world.close()  # waits for the push, which the timeout gives up
    assert world.stats.failed == 1 and endpoint.given_up == 0
    taken = await world.inner.take_wake(lease=5.0)
    assert taken is not None and taken.session_id == accepted.session_id


async def test_a_refused_connection_fails_the_push_not_the_prompt() -> None:
    refused = f"http://127.0.0.1:{free_port()}/wake"  # nothing listens there
    world = PushingWorld(MemoryWorld(), HTTPPush(refused, SECRET, timeout=10), timeout=5.0)
    agent = Agent(ScriptedModel(["Hi."]), world=world)
    turn = agent.session().prompt("Hello")
    await turn.accepted
    await world.drain()
    assert world.stats.failed == 1
    await agent.work(until_idle=True)
    assert await turn == "Hi."


async def test_an_sqs_queue_refusing_connections_holds_no_prompt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """botocore retries a refused connection with backoff (seconds): the prompt is
    acknowledged before the push has failed, and the push is given up at its
    timeout."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    queue = f"http://127.0.0.1:{free_port()}/000000000000/wakes"  # refuses connections
    world = PushingWorld(MemoryWorld(), SQSPush(queue, region="us-east-1"), timeout=2.0)
    agent = Agent(ScriptedModel(["Hi."]), world=world)
    turn = agent.session().prompt("Hello")
    await turn.accepted
    assert world.stats.failed == world.stats.sent == 0  # the push is still being retried
    await agent.work(until_idle=True)
    assert await turn == "Hi."
    assert world.stats.failed == 1
    await world.close()


def test_the_push_timeout_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    push = HTTPPush("http://127.0.0.1:9/", SECRET)
    assert PushingWorld(MemoryWorld(), push).timeout == 10.0
    monkeypatch.setenv("FXWORLD_PUSH_TIMEOUT", "0.25")
    assert PushingWorld(MemoryWorld(), push).timeout == 0.25
    for bad in ("soon", "0", "-1"):
        monkeypatch.setenv("FXWORLD_PUSH_TIMEOUT", bad)
        with pytest.raises(ConfigurationError, match="push timeout"):
            PushingWorld(MemoryWorld(), push)
    with pytest.raises(ConfigurationError, match="push timeout"):
        PushingWorld(MemoryWorld(), push, timeout=float("inf"))
