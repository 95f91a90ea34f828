"""The wake route and the Lambda handler answer a message from how the run ended
(``WorkResult.ended``): for a session the run took, they read nothing of the log
after the run; before it, only where the named log ends (one ``last_entry``, on a
pushing world: another worker may yield the session meanwhile)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from fxworld import Agent, MemoryWorld
from fxworld.aws import lambda_handler
from fxworld.push import message_body
from fxworld.testing import ScriptedModel
from fxworld.web import signed_headers, wake_handler
from tests.support.world_calls import CountingWorld, Recorder, slow_step

pytestmark = pytest.mark.timeout(60)

SECRET = "test-secret-0123456789abcdef"
READS = {"read", "last_entry", "follow"}


def counted_agent(script: list[Any]) -> tuple[Agent, CountingWorld, Recorder]:
    """An agent whose world counts its calls, labelled "before", "run" (inside
    ``work()``) and "after"."""
    counting = CountingWorld(MemoryWorld())
    push = Recorder()
    agent = Agent(ScriptedModel(script), tools=[slow_step], world=counting, push=push)  # type: ignore[arg-type]
    real = agent.work

    async def work(**kwargs: Any) -> Any:
        counting.phase = "run"
        try:
            return await real(**kwargs)
        finally:
            counting.phase = "after"

    agent.work = work  # type: ignore[method-assign]
    counting.phase = "before"
    return agent, counting, push


def reads(counting: CountingWorld, phase: str) -> dict[str, int]:
    return {m: n for m, n in counting.by_method(phase).items() if m in READS}


TWO_STEPS: list[Any] = [{"tool": "slow_step", "input": {"n": n}} for n in (1, 2)] + ["Done."]


@pytest.mark.parametrize(
    ("script", "status"), [(["Hello."], "done"), (TWO_STEPS, "yielded")], ids=["done", "yielded"]
)
async def test_the_wake_route_reads_nothing_after_the_run(script: list[Any], status: str) -> None:
    agent, counting, _ = counted_agent(script)
    sid = (await agent.session().create("Go")).session_id
    counting.calls.clear()
    handler = wake_handler(agent, secret=SECRET, time_limit=1.6, margin=0.5)
    body = message_body(sid)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=handler), base_url="http://test"
    ) as client:
        r = await client.post("/", content=body, headers=signed_headers(SECRET, body))
    assert (r.status_code, r.json()["status"]) == (200, status)
    assert counting.by_method("run")["read"] > 0  # the run read the log
    assert reads(counting, "after") == {}  # the route did not, after it
    assert reads(counting, "before") == {"last_entry": 1}  # where the log ended


class Context:
    def get_remaining_time_in_millis(self) -> int:
        return 1600


@pytest.fixture
def function() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=1) as pool:  # one warm execution environment
        yield pool


@pytest.mark.parametrize("script", [["Hello."], TWO_STEPS], ids=["done", "yielded"])
async def test_the_lambda_handler_reads_nothing_after_the_run(
    script: list[Any], function: ThreadPoolExecutor
) -> None:
    agent, counting, _ = counted_agent(script)
    sid = (await agent.session().create("Go")).session_id
    counting.calls.clear()
    handler = lambda_handler(agent, margin=0.5, lease=2.0)
    event = {"Records": [{"messageId": "m-1", "body": message_body(sid).decode()}]}
    loop = asyncio.get_running_loop()
    answer = await loop.run_in_executor(function, handler, event, Context())
    assert answer == {"batchItemFailures": []}  # over, or continued by its own push
    assert counting.by_method("run")["read"] > 0
    assert reads(counting, "after") == {}
    assert reads(counting, "before") == {"last_entry": 1}
