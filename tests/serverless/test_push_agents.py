"""Pushes and agents (W19): every message names the session's agent, whichever
process made the wake; a push URL with ``{agent}`` (or ``PerAgentPush``) sends it
to that agent's queue; the tick names the agent; a push written before agents
existed is still called, without it; ``lambda_handler`` and the wake route leave
another agent's message unrun."""

from __future__ import annotations

import json

import pytest

from fxworld import Agent, MemoryWorld
from fxworld.aws import lambda_handler
from fxworld.errors import ConfigurationError
from fxworld.push import (
    PerAgentPush,
    PushingWorld,
    SQSPush,
    agent_of,
    message_body,
    push_from_url,
    tick,
)
from fxworld.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)


class Queue:
    """A push that records (session, agent) for each message."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str | None]] = []

    async def push(self, session_id: str, *, delay: float = 0.0, agent: str | None = None) -> None:
        self.sent.append((session_id, agent))

    async def close(self) -> None:
        pass


class OldPush:
    """A push written before agents existed: no ``agent=``."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def push(self, session_id: str, *, delay: float = 0.0) -> None:
        self.sent.append(session_id)

    async def close(self) -> None:
        pass


def test_the_message_names_the_agent() -> None:
    body = message_body("s-1", "sales")
    assert json.loads(body)["agent"] == "sales" and agent_of(body) == "sales"
    assert agent_of(message_body("s-1")) is None  # an earlier version's message
    assert agent_of('{"session_id": "s-1", "agent": "no spaces"}') is None


async def test_each_message_goes_to_the_queue_of_the_sessions_agent() -> None:
    world = MemoryWorld()
    support_q, sales_q = Queue(), Queue()
    queues = PerAgentPush({"support": support_q, "sales": sales_q})
    support = Agent(ScriptedModel(["Hi."]), name="support", world=world, push=queues)
    sales = Agent(ScriptedModel(["Hi."]), name="sales", world=world, push=queues)
    a = (await support.session().create("Hi")).session_id
    b = (await sales.session().create("Hi")).session_id
    assert support_q.sent == [(a, "support")] and sales_q.sent == [(b, "sales")]
    # a wake of a sales session made through the support agent's world: sales's queue
    other = support.world
    assert isinstance(other, PushingWorld)
    await other.wake(b)
    await other.drain()
    assert sales_q.sent[-1] == (b, "sales") and len(support_q.sent) == 1
    # the tick names the agent too
    pushed = Queue()
    assert await tick(other, pushed, overdue=0.0) == 2
    assert sorted(pushed.sent) == sorted([(a, "support"), (b, "sales")])


async def test_a_push_without_agent_is_called_as_before() -> None:
    old = OldPush()
    agent = Agent(ScriptedModel(["Hi."]), name="support", world=MemoryWorld(), push=old)
    sid = (await agent.session().create("Hi")).session_id
    assert old.sent == [sid]


def test_a_push_url_with_agent_makes_a_queue_per_agent() -> None:
    made = push_from_url("sqs+https://sqs.eu-west-1.amazonaws.com/123456789012/wakes-{agent}")
    assert isinstance(made, PerAgentPush)
    sales = made.push_for("sales")
    assert isinstance(sales, SQSPush)
    assert sales.queue_url.endswith("/wakes-sales") and made.push_for("sales") is sales
    with pytest.raises(ConfigurationError, match="no queue for agent"):
        made.push_for(None)
    with pytest.raises(ConfigurationError, match="unknown push URL scheme"):
        push_from_url("kafka://broker/{agent}")


class _Context:
    def get_remaining_time_in_millis(self) -> int:
        return 20_000


async def test_lambda_hands_another_agents_message_back_unrun() -> None:
    """A function of ``support`` on a shared queue: the ``sales`` message is a batch
    item failure (delivered again, to the sales function in time) and its session
    is not run; a function serving both runs each message's agent."""
    world = MemoryWorld()
    support = Agent(ScriptedModel(["from support"]), name="support", world=world)
    sales = Agent(ScriptedModel(["from sales"]), name="sales", world=world)
    a = (await support.session().create("Hi")).session_id
    b = (await sales.session().create("Hi")).session_id
    event = {
        "Records": [
            {"messageId": "m-a", "body": message_body(a, "support").decode()},
            {"messageId": "m-b", "body": message_body(b, "sales").decode()},
        ]
    }
    out = await _invoke(support, event)
    assert out == {"batchItemFailures": [{"itemIdentifier": "m-b"}]}
    assert await _answer(world, a) == "from support" and await _answer(world, b) is None
    out = await _invoke([support, sales], event)
    assert out == {"batchItemFailures": []}
    assert await _answer(world, b) == "from sales"


async def _invoke(agents: object, event: dict[str, object]) -> object:
    import asyncio

    handler = lambda_handler(agents, margin=1.0)  # type: ignore[arg-type]
    return await asyncio.to_thread(handler, event, _Context())


async def _answer(world: MemoryWorld, sid: str) -> str | None:
    texts = [e.data["text"] for e in await world.read(sid) if e.kind == "turn.finished"]
    return texts[-1] if texts else None
