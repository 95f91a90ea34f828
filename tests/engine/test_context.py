"""Per-session context and typed answers in real worker processes (issue 39 items
1-2), on every engine world: two tenants' sessions on one worker, each tool call
scoped to its own tenant and each turn answering a validated ``Refund``, across a
SIGKILL of the worker."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import context_agent
import pytest
from conftest import SURVIVOR_LEASE, read_jsonl

import fxworld
from fxworld import Agent, TurnFailed
from fxworld.errors import ContextMismatch, InvalidContext
from fxworld.testing import ScriptedModel

pytestmark = pytest.mark.timeout(120)

TENANTS = {"acme": "u-17", "globex": "u-4"}
AGENT = "context_agent:agent"


@pytest.fixture
async def client(engine_world_url: str) -> Any:
    """The worker's agent in the test process, on the test's world: it prompts and
    reads, runs nothing."""
    world = fxworld.open_world(engine_world_url)
    a = context_agent.agent
    yield Agent(
        a.model,
        tools=list(a.tools.values()),
        world=world,
        context_type=context_agent.Tenant,
        output_type=context_agent.Refund,
    )
    await world.close()


@pytest.mark.parametrize("point", ["in-tool:orders", "after-message#3"])
async def test_two_tenants_on_one_worker_each_tool_call_scoped_across_a_sigkill(
    point: str, client: Agent[context_agent.Refund], start_worker: Any, tmp_path: Path
) -> None:
    turns = {
        tenant: client.session(context={"tenant": tenant, "user": user}).prompt("Refund my order")
        for tenant, user in TENANTS.items()
    }
    sids = {tenant: (await t.accepted).session_id for tenant, t in turns.items()}

    first = start_worker(agent=AGENT, env={"FXWORLD_TEST_CRASH_AT": point})
    assert await first.wait() == -signal.SIGKILL, first.text()
    second = start_worker(agent=AGENT, lease=SURVIVOR_LEASE)
    for turn in turns.values():
        answer = await asyncio.wait_for(turn, 60)
        assert answer == context_agent.Refund(order="1", cents=250)  # typed: a Refund
    second.signal(signal.SIGTERM)
    assert await second.wait() == 0, second.text()

    runs = read_jsonl(tmp_path / "runs.jsonl")
    tenant_of = {sid: tenant for tenant, sid in sids.items()}
    assert {r["session"] for r in runs} == set(sids.values())
    assert all(r["tenant"] == tenant_of[r["session"]] for r in runs), runs  # never the other's
    assert {r["pid"] for r in runs} <= {first.pid, second.pid}

    for tenant, sid in sids.items():
        stored = await client.session(sid).read()
        kinds = [e.kind for e in stored]
        assert stored[0].data["context"] == {"tenant": tenant, "user": TENANTS[tenant]}
        assert kinds.count("turn.finished") == 1 and "turn.failed" not in kinds
        finished = stored[kinds.index("turn.finished")].data
        assert finished["output"] == {"order": "1", "cents": 250}  # the validated JSON
        assert kinds.count("output.invalid") == 1  # the refusal is saved once, not redone
        assert kinds.count("message") == 3
        tool_output = next(e.data["output"] for e in stored if e.kind == "tool.finished")
        assert tool_output == f'["{tenant}-order-1"]'

    heard = read_jsonl(tmp_path / "model.jsonl")
    assert heard and all("acme" not in h["instructions"] for h in heard)  # not shown by default
    assert all("JSON Schema" in h["instructions"] for h in heard)
    retried = [h for h in heard if h["n"] == 2]
    assert retried and all(
        "does not match the required JSON Schema" in h["messages"][-1]["text"] for h in retried
    )


async def test_a_context_is_saved_once_and_never_changed(client: Agent[Any]) -> None:
    with pytest.raises(InvalidContext):  # refused before any I/O
        client.session("s-bad", context={"tenant": "acme"})  # no user
    with pytest.raises(InvalidContext):
        client.session("s-bad", context=["acme"])
    assert await client.session("s-bad").read() == []

    acme = {"tenant": "acme", "user": "u-17"}
    await client.session("s-1", context=acme).prompt("one").accepted
    await client.session("s-1", context=context_agent.Tenant(**acme)).prompt("two").accepted
    await client.session("s-1").prompt("three").accepted  # no context given: the saved one
    with pytest.raises(ContextMismatch):
        await client.session("s-1", context={"tenant": "globex", "user": "u-4"}).prompt("x")
    stored = await client.session("s-1").read()
    assert [e.data["text"] for e in stored] == ["one", "two", "three"]  # nothing written
    assert [e.data.get("context") for e in stored] == [acme, None, None]
    assert await client.session("s-1").saved_context() == acme

    fork = await client.session("s-1").fork()
    assert await fork.saved_context() == acme  # a fork keeps it


async def test_an_answer_refused_output_retries_times_fails_the_turn(
    engine_world_url: str,
) -> None:
    world = fxworld.open_world(engine_world_url)
    try:
        agent = Agent(
            ScriptedModel(["no", "still no", "never"]),
            world=world,
            output_type=context_agent.Refund,
            output_retries=1,
        )
        turn = agent.session().prompt("Refund?")
        await agent.work(until_idle=True)
        with pytest.raises(TurnFailed, match="did not match Refund after 2 tries"):
            await turn
        stored = await agent.session(turn.session_id).read()
        kinds = [e.kind for e in stored]
        assert kinds.count("output.invalid") == 2 and kinds.count("message") == 2
        assert kinds[-2:] == ["output.invalid", "turn.failed"]  # one append
    finally:
        await world.close()
