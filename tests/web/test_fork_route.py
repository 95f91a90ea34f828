"""POST /sessions/{id}/fork through an ASGI client, on a MemoryWorld: statuses,
bodies, the authorize action "fork", the Origin and JSON rules, and refusals that
write nothing."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from starlette.requests import Request

from fxworld import Agent, MemoryWorld
from fxworld.engine import encode_cursor
from fxworld.testing import ScriptedModel
from fxworld.web import create_app

pytestmark = pytest.mark.timeout(60)


def client_of(agent: Agent, **options: object) -> httpx.AsyncClient:
    app = create_app(agent, **options)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def answered(agent: Agent, client: httpx.AsyncClient) -> str:
    sid = (await client.post("/sessions", json={"text": "Hello."})).json()["session_id"]
    await asyncio.wait_for(agent.work(until_idle=True, poll_interval=0.02), 30)
    return str(sid)


async def test_fork_route_makes_a_fork_and_refuses_bad_input() -> None:
    agent = Agent(ScriptedModel(["Hi.", "Again."]), world=MemoryWorld())
    async with client_of(agent, allow_anyone=True, allowed_origins=["https://app"]) as client:
        sid = await answered(agent, client)
        log = await agent.session(sid).read()
        r = await client.post(f"/sessions/{sid}/fork", json={})
        assert r.status_code == 201
        new = r.json()["session_id"]
        assert r.json() == {"session_id": new, "source": sid, "stream": f"/sessions/{new}/stream"}
        forked = await agent.session(new).read()
        assert forked[0].kind == "forked" and forked[0].data["source"] == sid

        r = await client.post(f"/sessions/{sid}/fork", json={"session_id": "mine"})
        assert r.status_code == 201 and r.json()["session_id"] == "mine"
        again = await client.post(f"/sessions/{sid}/fork", json={"session_id": "mine"})
        assert again.status_code == 201  # a retry of the same fork returns it
        refusals = [
            ({"session_id": "mine", "at": encode_cursor(sid, 0)}, 409, "session_exists"),
            ({"session_id": sid}, 400, "invalid_request"),
            ({"at": encode_cursor(sid, 3)}, 400, "invalid_request"),  # inside the turn
            ({"at": "garbage"}, 400, "invalid_cursor"),
            ({"at": 5}, 400, "invalid_request"),
            ({"session_id": "bad id"}, 400, "invalid_session_id"),
        ]
        for body, status, code in refusals:
            r = await client.post(f"/sessions/{sid}/fork", json=body)
            assert (r.status_code, r.json()["error"]) == (status, code), body
        r = await client.post("/sessions/no-such/fork", json={})
        assert r.status_code == 404
        r = await client.post(f"/sessions/{sid}/fork", content=b"{}")  # no JSON content type
        assert r.status_code == 415
        r = await client.post(f"/sessions/{sid}/fork", json={}, headers={"Origin": "https://evil"})
        assert r.status_code == 403
        assert await agent.session(sid).read() == log
        assert await agent.world.list_sessions() == sorted([sid, new, "mine"])  # type: ignore[attr-defined]


async def test_fork_asks_authorize_for_the_source_then_the_proposed_id() -> None:
    agent = Agent(ScriptedModel(["Hi."]), world=MemoryWorld())
    asked: list[tuple[str, str]] = []

    def authorize(request: Request, session_id: str, action: str) -> bool:
        asked.append((session_id, action))
        return action != "fork" or session_id != "not-yours"

    async with client_of(agent, authorize=authorize) as client:
        sid = await answered(agent, client)
        asked.clear()
        r = await client.post(f"/sessions/{sid}/fork", json={"session_id": "not-yours"})
        assert r.status_code == 403
        assert asked == [(sid, "fork"), ("not-yours", "fork")]
        assert await agent.session("not-yours").read() == []
        r = await client.post("/sessions/not-yours/fork", json={})
        assert r.status_code == 403  # refused before the session is looked up
