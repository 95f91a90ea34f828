"""The approval and stop routes through an ASGI client, on a MemoryWorld: statuses,
bodies, and the authorize actions "approve" and "stop"."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.requests import Request

from fxworld import Agent, MemoryWorld, tool
from fxworld.testing import ScriptedModel
from fxworld.web import create_app

pytestmark = pytest.mark.timeout(60)


@tool(needs_approval=True, approval_timeout=600)
def refund_order(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


REPLIES = [{"tool": "refund_order", "input": {"order_id": "A-1"}}, "Done."]


@pytest.fixture
async def agent() -> Agent:
    return Agent(ScriptedModel(REPLIES), tools=[refund_order], world=MemoryWorld())


@pytest.fixture
async def client(agent: Agent) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(agent, allow_anyone=True)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as c:
        yield c


async def run_until_idle(agent: Agent) -> None:
    await asyncio.wait_for(agent.work(until_idle=True, poll_interval=0.02), 30)


async def parked(agent: Agent, client: httpx.AsyncClient) -> tuple[str, dict[str, Any]]:
    r = await client.post("/sessions", json={"text": "Refund A-1."})
    sid = r.json()["session_id"]
    await run_until_idle(agent)
    listed = await client.get(f"/sessions/{sid}/approvals")
    assert listed.status_code == 200
    [waiting] = listed.json()["approvals"]
    return sid, waiting


async def test_list_and_approve(agent: Agent, client: httpx.AsyncClient) -> None:
    sid, waiting = await parked(agent, client)
    assert waiting["name"] == "refund_order" and waiting["input"] == {"order_id": "A-1"}
    assert waiting["requested_at"] < waiting["expires_at"]
    url = f"/sessions/{sid}/approvals/{waiting['execution_id']}"
    r = await client.post(url, json={"approve": True, "note": "fine"})
    assert r.status_code == 200
    assert r.json() == {"execution_id": waiting["execution_id"], "approved": True}
    assert (await client.post(url, json={"approve": True})).status_code == 200  # the same
    refused = await client.post(url, json={"approve": False, "reason": "changed"})
    assert refused.status_code == 409 and refused.json()["error"] == "already_decided"
    await run_until_idle(agent)
    assert (await client.get(f"/sessions/{sid}/approvals")).json() == {"approvals": []}
    entries = await agent.session(sid).read()
    [decided] = [e for e in entries if e.kind == "approval.decided"]
    assert decided.data == {**decided.data, "approved": True, "note": "fine"}
    assert entries[-1].kind == "turn.finished"


async def test_deny_unknown_calls_and_bad_bodies(agent: Agent, client: httpx.AsyncClient) -> None:
    sid, waiting = await parked(agent, client)
    url = f"/sessions/{sid}/approvals/{waiting['execution_id']}"
    before = await agent.session(sid).read()
    for body in ({}, {"approve": "yes"}, {"approve": False, "reason": 3}, [True]):
        r = await client.post(url, json=body)
        assert r.status_code == 400, body
    as_json = {"content-type": "application/json"}
    bad = await client.post(url, content=b"{nope", headers=as_json)
    assert bad.json()["error"] == "invalid_json"
    assert (await client.post(url, content=b"x" * 20_000, headers=as_json)).status_code == 413
    assert (await client.post(url, content=b"{}")).status_code == 415  # not said to be JSON
    unknown = await client.post(f"/sessions/{sid}/approvals/nope", json={"approve": True})
    assert unknown.status_code == 404 and unknown.json()["error"] == "unknown_call"
    assert (await client.get("/sessions/no-such/approvals")).status_code == 404
    assert await agent.session(sid).read() == before  # nothing written by a refusal
    r = await client.post(url, json={"approve": False, "reason": "too large"})
    assert r.status_code == 200 and r.json()["approved"] is False
    assert (await client.post(url, json={"approve": True})).status_code == 409


async def test_stop_answers_202_and_ends_the_waiting_turn(
    agent: Agent, client: httpx.AsyncClient
) -> None:
    sid, waiting = await parked(agent, client)
    r = await client.post(f"/sessions/{sid}/stop", json={"reason": "user pressed Stop"})
    assert r.status_code == 202 and r.json() == {"session_id": sid}
    await run_until_idle(agent)
    kinds = [e.kind for e in await agent.session(sid).read()]
    assert kinds[-1] == "turn.stopped"
    assert (await client.post(f"/sessions/{sid}/stop", json={})).status_code == 202  # no-op
    assert [e.kind for e in await agent.session(sid).read()] == kinds
    decide = await client.post(
        f"/sessions/{sid}/approvals/{waiting['execution_id']}", json={"approve": True}
    )
    assert decide.status_code == 404
    assert (await client.post("/sessions/no-such/stop", json={})).status_code == 404


async def test_each_route_asks_authorize_with_its_action(agent: Agent) -> None:
    asked: list[tuple[str, str]] = []
    allowed = {"create", "stream"}

    def authorize(request: Request, session_id: str, action: str) -> bool:
        asked.append((session_id, action))
        return action in allowed

    app = create_app(agent, authorize=authorize)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        sid = (await client.post("/sessions", json={"text": "Refund A-1."})).json()["session_id"]
        await run_until_idle(agent)
        [waiting] = await agent.session(sid).pending_approvals()
        url = f"/sessions/{sid}/approvals/{waiting.execution_id}"
        assert (await client.get(f"/sessions/{sid}/approvals")).status_code == 403
        assert (await client.post(url, json={"approve": True})).status_code == 403
        assert (await client.post(f"/sessions/{sid}/stop", json={})).status_code == 403
        # refused before the session is looked up: no probing which sessions exist
        assert (await client.post("/sessions/no-such/stop", json={})).status_code == 403
        assert await agent.session(sid).pending_approvals() == [waiting]
        assert [a for _, a in asked[1:]] == ["approve", "approve", "stop", "stop"]
        allowed.update({"approve", "stop"})
        assert (await client.post(url, json={"approve": True})).status_code == 200
        assert (await client.post(f"/sessions/{sid}/stop", json={})).status_code == 202
