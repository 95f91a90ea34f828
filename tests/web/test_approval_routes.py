"""The approval and stop routes through an ASGI client, on a MemoryWorld: statuses,
bodies, and the authorize actions "approve" and "stop"."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.requests import Request

from fxworld import Agent, MemoryWorld, StreamEvent, tool
from fxworld.engine import log
from fxworld.testing import ScriptedModel, moved_clock
from fxworld.web import create_app
from tests.web._server import CountingWorld

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


@tool(needs_approval=True, approval_timeout=0.5)
def pay_out(card: str, api_key: str) -> str:
    """Pay out to a card (waits for a person at most half a second)."""
    return "paid"


SECRET_INPUT = {"card": "4111 1111 1111 1111", "api_key": "sk-live-0123456789abcdef"}


def client_of(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def test_an_expired_approval_is_409_over_http() -> None:
    agent = Agent(
        ScriptedModel([{"tool": "pay_out", "input": SECRET_INPUT}, "Not paid."]),
        tools=[pay_out],
        world=MemoryWorld(),
    )
    async with client_of(create_app(agent, allow_anyone=True)) as client:
        sid = (await client.post("/sessions", json={"text": "Pay."})).json()["session_id"]
        await run_until_idle(agent)
        [waiting] = await agent.session(sid).pending_approvals()
        with moved_clock() as clock:
            clock.advance(0.7)  # past expires_at, no worker up
            assert (await client.get(f"/sessions/{sid}/approvals")).json() == {"approvals": []}
            url = f"/sessions/{sid}/approvals/{waiting.execution_id}"
            for body in ({"approve": True}, {"approve": False, "reason": "late"}):
                r = await client.post(url, json=body)
                assert r.status_code == 409 and r.json()["error"] == "approval_expired", r.text
            await run_until_idle(agent)
    entries = await agent.session(sid).read()
    [decided] = [e for e in entries if e.kind == "approval.decided"]
    assert decided.data["expired"] is True and decided.data["approved"] is False
    assert entries[-1].kind == "turn.finished"
    assert not [e for e in entries if e.kind == "tool.started"]


async def test_the_approval_list_passes_through_visible() -> None:
    """A ``visible`` that hides tool inputs hides them in the approval list too;
    one that drops the approval event drops the call from the list."""
    agent = Agent(
        ScriptedModel([{"tool": "pay_out", "input": SECRET_INPUT}, "Paid."]),
        tools=[dataclasses.replace(pay_out, approval_timeout=None)],
        world=MemoryWorld(),
    )
    shown_events: list[StreamEvent] = []

    async def hide_inputs(request: Request, event: StreamEvent) -> StreamEvent | None:
        shown_events.append(event)
        if request.headers.get("x-role") == "outsider" and event.kind == "approval.requested":
            return None
        data = {k: v for k, v in event.data.items() if k != "input"}
        return dataclasses.replace(event, data=data)

    async with client_of(create_app(agent, allow_anyone=True, visible=hide_inputs)) as client:
        sid = (await client.post("/sessions", json={"text": "Pay."})).json()["session_id"]
        await run_until_idle(agent)
        r = await client.get(f"/sessions/{sid}/approvals")
        [waiting] = r.json()["approvals"]
        assert waiting["name"] == "pay_out" and waiting["input"] is None
        assert "4111" not in r.text and "sk-live" not in r.text
        outsider = await client.get(f"/sessions/{sid}/approvals", headers={"x-role": "outsider"})
        assert outsider.json() == {"approvals": []}
    # the hook saw the very event the stream shows for the call, cursor and all
    [requested] = [e for e in await agent.session(sid).read() if e.kind == "approval.requested"]
    assert shown_events[0] == requested


async def long_session(world: MemoryWorld, sid: str, turns: int) -> None:
    """``turns`` finished turns of 40 entries each, as a worker writes them."""
    seq = 0
    for t in range(turns):
        text = [log.entry(log.TEXT, call=f"c{t}", text="word ") for _ in range(36)]
        seq = await world.append(
            sid,
            [
                log.entry(log.PROMPT, text=f"q{t}", key=f"k{t}"),
                log.entry(log.TURN_STARTED, prompt=seq + 1, turn=f"t{t}"),
                *text,
                log.entry(log.MESSAGE, call=f"c{t}", text="...", tool_calls=[]),
                log.entry(log.TURN_FINISHED, prompt=seq + 1, turn=f"t{t}", text="..."),
            ],
        )


async def test_the_approval_routes_read_only_the_latest_turn() -> None:
    """On a session of 200 turns (8,000 entries) parked on a call, listing,
    deciding and stopping each read a bounded number of entries, not the log."""
    world = CountingWorld()
    sid = "s-long"
    await long_session(world, sid, 200)
    replies: list[Any] = ["..."] * 200 + REPLIES  # one per assistant message heard
    agent = Agent(ScriptedModel(replies), tools=[refund_order], world=world)
    await agent.session(sid).prompt("Refund A-1.").accepted
    await run_until_idle(agent)  # the worker reads the whole log: it needs it
    async with client_of(create_app(agent, allow_anyone=True)) as client:
        reads: dict[str, int] = {}
        world.handed_out = 0
        [waiting] = (await client.get(f"/sessions/{sid}/approvals")).json()["approvals"]
        reads["list"], world.handed_out = world.handed_out, 0
        url = f"/sessions/{sid}/approvals/{waiting['execution_id']}"
        assert (await client.post(url, json={"approve": True})).status_code == 200
        reads["decide"], world.handed_out = world.handed_out, 0
        assert (await client.post(f"/sessions/{sid}/stop", json={})).status_code == 202
        reads["stop"] = world.handed_out
    # each: ~2 * log2(8,000) one-entry reads to find the end, then the last turn
    assert all(n < 80 for n in reads.values()), reads


async def test_an_empty_stop_body_is_accepted_only_when_sent_as_json(
    agent: Agent, client: httpx.AsyncClient
) -> None:
    """``POST .../stop`` with no body works when it says JSON. Without that, it is
    415 and stops nothing, even empty: a cross-site page can send a bodyless POST
    with no Content-Type (``fetch`` without a body, ``sendBeacon``), or an empty
    form, without a preflight."""
    sid, _ = await parked(agent, client)
    url = f"/sessions/{sid}/stop"
    before = await agent.session(sid).read()
    for headers in (
        {},  # no Content-Type at all
        {"content-type": "application/x-www-form-urlencoded"},
        {"content-type": "text/plain"},
        {"content-type": "multipart/form-data; boundary=x"},
    ):
        r = await client.post(url, content=b"", headers=headers)
        assert r.status_code == 415, headers
        assert "application/json" in r.json()["message"]
    assert await agent.session(sid).read() == before
    r = await client.post(url, content=b"", headers={"content-type": "application/json"})
    assert r.status_code == 202
    assert (await agent.session(sid).read())[-1].kind == "stop.requested"
