"""The serverless scenarios, on each queue (tests/serverless/deployments.py): no
worker process anywhere; only the queue invokes the function."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fxworld import Agent
from fxworld.localqueues.sqs import EventSourceMapping
from fxworld.push import PushingWorld, tick
from fxworld.testing import ScriptedModel
from tests.serverless.deployments import Deployment, queue_servers

pytest.importorskip("moto")
pytest.importorskip("vercel.queue")

REPO = Path(__file__).resolve().parents[2]

Deploy = Callable[..., Deployment]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with queue_servers(tmp_path_factory.mktemp("queues")) as running:
        yield running


@pytest.fixture(params=["sqs", "vercel"])
async def deploy(
    request: pytest.FixtureRequest, servers: dict[str, Any], tmp_path: Path
) -> AsyncIterator[Deploy]:
    made: list[Deployment] = []

    def make(script: str, **env: str) -> Deployment:
        d = Deployment(request.param, servers[request.param], tmp_path, script, **env)
        made.append(d)
        return d

    yield make
    for d in made:
        await d.close()


async def test_a_prompt_runs_to_its_answer_with_no_worker(deploy: Deploy) -> None:
    d = deploy("hello")
    d.start()
    accepted = await d.client.session().create("Hi")
    kinds = await d.answer(accepted.session_id, accepted.cursor)
    assert kinds[-2:] == ["turn.finished", "Hello from a function."]
    assert d.invocations >= 1


async def test_a_function_killed_mid_tool_continues_after_redelivery_tool_not_rerun(
    deploy: Deploy,
) -> None:
    d = deploy("refund", TEST_KILL_IN_TOOL="1")
    d.start()
    accepted = await d.client.session().create("Refund o-1")
    kinds = await d.answer(accepted.session_id, accepted.cursor)
    assert kinds[-1] == "Checked; all good."
    assert d.crashed >= 1  # the function died (SIGKILL) in the tool
    assert (d.tmp / "refund-o-1").read_text().count("x") == 1  # never run again
    assert any("may have partly run" in h for h in d.heard())  # the model was told


async def test_a_turn_three_times_the_time_limit_finishes_over_several_invocations(
    deploy: Deploy,
) -> None:
    d = deploy("long", TEST_STEP_SECONDS="1.2", TIME_LIMIT="4")
    d.start()
    accepted = await d.client.session().create("Go long")
    kinds = await d.answer(accepted.session_id, accepted.cursor, within=120)
    assert kinds[-1] == "Long turn over."
    assert kinds.count("turn.yielded") >= 2
    assert kinds.count("turn.finished") == 1
    assert d.invocations >= 3


async def test_a_push_that_failed_is_recovered_by_the_tick(
    deploy: Deploy, caplog: pytest.LogCaptureFixture
) -> None:
    d = deploy("hello")
    broken = Agent(ScriptedModel([]), world=d.url, push=d.push(broken=True))
    accepted = await broken.session().create("Hi")  # accepted though the push fails
    assert isinstance(broken.world, PushingWorld)
    await broken.world.drain()  # (the push goes on beside the prompt)
    assert "push for session" in caplog.text
    assert broken.world.stats.failed == 1
    await broken.world.close()
    d.start()
    await asyncio.sleep(3)  # nothing rings: the wake waits in the world
    assert d.invocations == 0
    push = d.push()
    assert await tick(d.client.world, push, overdue=0.0) == 1
    await push.close()
    kinds = await d.answer(accepted.session_id, accepted.cursor)
    assert kinds[-1] == "Hello from a function."


async def test_fifty_sessions_prompted_at_once_all_finish_none_twice(deploy: Deploy) -> None:
    d = deploy("hello")
    d.start()
    made = await asyncio.gather(*(d.client.session().create("Hi") for _ in range(50)))
    ends = await asyncio.gather(*(d.answer(a.session_id, a.cursor, 120) for a in made))
    assert all(k[-1] == "Hello from a function." for k in ends)
    for a in made:
        events = await d.client.session(a.session_id).read()
        assert [e.kind for e in events].count("turn.finished") == 1


async def test_an_approval_decided_from_another_process_pushes_and_resumes(
    deploy: Deploy,
) -> None:
    d = deploy("approve")
    d.start()
    accepted = await d.client.session().create("Delete a-1")
    s = d.client.session(accepted.session_id)
    pending = []
    for _ in range(300):  # bounded: 30 s
        pending = await s.pending_approvals()
        if pending:
            break
        await asyncio.sleep(0.1)
    assert pending
    # The function answered the first message (the turn waits for a person): only
    # the CLI's push ($FXWORLD_PUSH) can start the turn again.
    await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "fxworld.cli", "sessions", "approve", accepted.session_id,
         pending[0].execution_id, "--world", d.url],
        cwd=REPO, env={**os.environ, **d.env}, check=True, timeout=60,
    )  # fmt: skip
    kinds = await d.answer(accepted.session_id, accepted.cursor)
    assert kinds[-1] == "Deleted."
    assert (d.tmp / "delete-a-1").read_text().count("x") == 1


async def test_prompts_queued_in_one_session_cost_no_more_deliveries_than_prompts(
    deploy: Deploy,
) -> None:
    """Each prompt used to push its own message, delivered again while a run held
    the session: 9, 28 and 91 Vercel deliveries for 5, 10 and 20 prompts (0.4 s
    turns). A prompt whose session's pending wake already has its message pushes
    none: 5, 4 and 12."""
    d = deploy("chat", TEST_MODEL_DELAY="0.1")  # 0.4 s a turn
    d.start()
    s = d.client.session()
    await s.create("Prompt 0")
    for i in range(1, 10):
        await s.prompt(f"Prompt {i}").accepted
    for _ in range(1200):  # bounded: 120 s
        kinds = [e.kind for e in await s.read()]
        if kinds.count("turn.finished") == 10:
            break
        await asyncio.sleep(0.1)
    assert kinds.count("turn.finished") == 10
    assert isinstance(d.client.world, PushingWorld)
    assert d.client.world.stats.coalesced >= 1
    await asyncio.to_thread(d.function.stop)  # what is still on its way is delivered
    delivered = d.function.received if isinstance(d.function, EventSourceMapping) else d.invocations
    # 1 to 4 here: the first message, and one pushed while a run held the session,
    # delivered again each lease (2 s) until the session is free; before, one a
    # prompt (SQS: 10 messages; Vercel: 19 deliveries and more)
    assert delivered <= 7, delivered


async def test_a_session_whose_run_kills_the_function_every_time_ends_with_a_clear_error(
    deploy: Deploy,
) -> None:
    """Each invocation dies (SIGKILL) before the turn starts: the session is
    delivered ``max_deliveries`` times (1 here) and once more, then its turn fails
    and says why, instead of being delivered forever. (A turn that dies once
    started gave up so already.)"""
    d = deploy("hello", FXWORLD_TEST_CRASH_AT="before-turn-started", TEST_MAX_DELIVERIES="1")
    d.start()
    accepted = await d.client.session().create("Hi")
    kinds = await d.answer(accepted.session_id, accepted.cursor, within=60)
    assert kinds[-1] == "turn.failed"
    [failed] = [e for e in await d.client.session(accepted.session_id).read()
                if e.kind == "turn.failed"]  # fmt: skip
    assert failed.data["error"] == (
        "gave up: the prompt was delivered 2 times and "
        "each worker died or hung before its turn started"
    )
    assert d.crashed >= 1
