"""Who decided, over HTTP (issue 47 item 3): the session routes and the inspector
record the ``authorize`` identity as the ``actor`` of Approve, Deny, Stop and Retry
(the str ``authorize`` returned; ``"authorized"`` for ``True``; ``"local"`` without
``authorize``), with the note or reason sent, and the inspector's timeline shows
both. An ``authorize`` answer that cannot name anyone grants nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from starlette.requests import Request

from fxworld import Agent, MemoryWorld, tool
from fxworld.engine import log
from fxworld.protocol import World
from fxworld.testing import ScriptedModel
from fxworld.web import create_app, create_inspector
from tests.web import _turns

pytestmark = pytest.mark.timeout(60)
JSON = {"Content-Type": "application/json"}


@tool(needs_approval=True)
def refund_order(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


REFUND = {"tool": "refund_order", "input": {"order_id": "A-1"}}


def _client(app: Any, **headers: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers=headers
    )


def who(request: Request, session_id: str, action: str) -> bool | str:
    """The app's authorize: a logged-in user by name, a service token as ``True``."""
    user = request.headers.get("x-user")
    if user:
        return user
    return request.headers.get("authorization") == "Bearer service"


async def _parked(agent: Agent, sid: str) -> str:
    await agent.session(sid).prompt("Refund A-1.").accepted
    await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)
    [waiting] = await agent.session(sid).pending_approvals()
    return waiting.execution_id


async def _said(world: World, sid: str, kind: str) -> dict[str, Any]:
    [data] = [e.data for e in await world.read(sid, 0) if e.kind == kind]
    return dict(data)


async def test_the_session_routes_record_who_authorize_named() -> None:
    world = MemoryWorld()
    agent = Agent(ScriptedModel([REFUND] * 3), tools=[refund_order], world=world)
    app = create_app(agent, authorize=who)
    xids = {sid: await _parked(agent, sid) for sid in ("a", "b", "c")}
    async with _client(app, **JSON, **{"x-user": "alice@example.com"}) as alice:
        r = await alice.post(
            f"/sessions/a/approvals/{xids['a']}", json={"approve": True, "note": "ok"}
        )
        assert r.status_code == 200
        r = await alice.post(
            f"/sessions/b/approvals/{xids['b']}", json={"approve": False, "reason": "fraud"}
        )
        assert r.status_code == 200
    async with _client(app, **JSON, authorization="Bearer service") as service:
        assert (await service.post("/sessions/c/stop", json={"reason": "test"})).status_code == 202
    approved = await _said(world, "a", log.APPROVAL_DECIDED)
    assert (approved["actor"], approved["note"]) == ("alice@example.com", "ok")
    denied = await _said(world, "b", log.APPROVAL_DECIDED)
    assert (denied["actor"], denied["reason"], denied["note"]) == (
        "alice@example.com",
        "fraud",
        "fraud",
    )
    assert await _said(world, "c", log.STOP_REQUESTED) == {
        "v": 2,
        "prompt": 1,
        "reason": "test",
        "actor": "authorized",  # True names no one
    }

    anyone = create_app(agent, allow_anyone=True)  # no authorize: "local"
    agent2 = Agent(ScriptedModel([REFUND]), tools=[refund_order], world=world)
    xid = await _parked(agent2, "d")
    async with _client(anyone, **JSON) as client:
        r = await client.post(f"/sessions/d/approvals/{xid}", json={"approve": True})
        assert r.status_code == 200
    decided = await _said(world, "d", log.APPROVAL_DECIDED)
    assert decided["actor"] == "local" and decided["note"] is None


async def test_the_inspector_records_and_shows_who_decided_stopped_and_retried() -> None:
    world = MemoryWorld()
    await _turns.finished_turn(world, "w")
    await _turns.waiting_turn(world, "w")
    await _turns.finished_turn(world, "n")
    await _turns.waiting_turn(world, "n")
    await _turns.finished_turn(world, "f")
    await _turns.failed_turn(world, "f")

    def operator(request: Request, session_id: str, action: str) -> str:
        return "ops:carol"

    app = create_inspector(world, authorize=operator)
    async with _client(app, **JSON) as client:
        yes = await client.post(
            "/sessions/w/approvals/xw3", json={"approve": True, "note": "ok <b>"}
        )
        no = await client.post("/sessions/n/approvals/xn3", json={"approve": False, "reason": "no"})
        stop = await client.post("/sessions/w/stop", json={"reason": "enough"})
        retry = await client.post("/sessions/f/retry", json={})
        assert [r.status_code for r in (yes, no, stop, retry)] == [200, 200, 202, 202]
        pages = {sid: (await client.get(f"/sessions/{sid}")).text for sid in "wnf"}
    await app.state.close()
    assert (await _said(world, "w", log.APPROVAL_DECIDED))["actor"] == "ops:carol"
    assert (await _said(world, "n", log.APPROVAL_DECIDED))["note"] == "no"
    assert (await _said(world, "w", log.STOP_REQUESTED))["actor"] == "ops:carol"
    retried = (await world.read("f", 0))[-1]
    assert retried.kind == log.PROMPT and retried.data["actor"] == "ops:carol"

    # the timeline says who, and what they said (escaped)
    assert 'approved by <b class="actor">ops:carol</b>' in pages["w"]
    assert "note: <q>ok &lt;b&gt;</q>" in pages["w"]
    assert 'stop requested by <b class="actor">ops:carol</b>' in pages["w"]
    assert "reason: <q>enough</q>" in pages["w"]
    assert 'denied by <b class="actor">ops:carol</b>' in pages["n"]
    assert "reason: <q>no</q>" in pages["n"]
    assert 'Retry by <b class="actor">ops:carol</b>: the failed turn' in pages["f"]

    local = create_inspector(world, allow_anyone=True)  # fxworld inspect on loopback
    await _turns.waiting_turn(world, "l")
    async with _client(local, **JSON) as client:
        r = await client.post("/sessions/l/approvals/xl3", json={"approve": False})
        assert r.status_code == 200
    await local.state.close()
    assert (await _said(world, "l", log.APPROVAL_DECIDED))["actor"] == "local"


@pytest.mark.parametrize("answer", ["", "   ", "x" * 201, "alice\r\nx-forged: 1"])
async def test_a_str_that_cannot_name_the_caller_grants_nothing(
    answer: str, caplog: pytest.LogCaptureFixture
) -> None:
    world = MemoryWorld()
    await _turns.waiting_turn(world, "s")
    before = await world.read("s", 0)

    def authorize(request: Request, session_id: str, action: str) -> str:
        return answer

    agent = Agent(ScriptedModel(["-"]), world=world)
    for app in (
        create_app(agent, authorize=authorize),
        create_inspector(world, authorize=authorize),
    ):
        async with _client(app, **JSON) as client:
            r1 = await client.post("/sessions/s/approvals/xs3", json={"approve": True})
            r2 = await client.post("/sessions/s/stop", json={})
            for r in (r1, r2):
                assert r.status_code == 500 and r.json()["error"] == "internal"
    assert await world.read("s", 0) == before
    assert "cannot name the caller" in caplog.text
