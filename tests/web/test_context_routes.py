"""A session's context over HTTP (issue 39 item 1): only the server's own hook sets
it, derived from the request; a body that names one is refused unless the app
allows it; ``authorize`` (routes and inspector) sees the session's context."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.requests import Request

from fxworld import Agent, MemoryWorld
from fxworld.errors import ConfigurationError
from fxworld.testing import ScriptedModel
from fxworld.web import create_app, create_inspector

pytestmark = pytest.mark.timeout(60)
JSON = {"Content-Type": "application/json"}


def tenant_of(request: Request) -> dict[str, str]:
    """The server's hook: the tenant of the request's login (here, a header)."""
    return {"tenant": request.headers["x-tenant"]}


asked: list[tuple[str, Any]] = []


def same_tenant(request: Request, session_id: str, action: str, *, context: Any) -> bool:
    asked.append((action, context))
    return context is not None and context.get("tenant") == request.headers.get("x-tenant")


def _client(app: Any, tenant: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://test",
        headers={**JSON, "x-tenant": tenant},
    )


async def test_the_server_hook_sets_the_context_and_authorize_sees_it() -> None:
    world = MemoryWorld()
    agent = Agent(ScriptedModel(["hi"] * 4), world=world)
    app = create_app(agent, authorize=same_tenant, context=tenant_of)
    asked.clear()
    async with _client(app, "acme") as acme, _client(app, "globex") as globex:
        made = await acme.post("/sessions", json={"text": "hello", "session_id": "s-acme"})
        assert made.status_code == 202, made.text
        assert await agent.session("s-acme").saved_context() == {"tenant": "acme"}
        assert ("create", {"tenant": "acme"}) in asked

        # another tenant's request is refused by authorize, which saw the saved context
        refused = await globex.post("/sessions/s-acme/prompts", json={"text": "mine now"})
        assert refused.status_code == 403
        assert asked[-1] == ("prompt", {"tenant": "acme"})
        ok = await acme.post("/sessions/s-acme/prompts", json={"text": "again"})
        assert ok.status_code == 202

        # the client's body never sets it here: 400, and nothing is written
        body = {"text": "hi", "session_id": "s-x", "context": {"tenant": "globex"}}
        forged = await acme.post("/sessions", json=body)
        assert forged.status_code == 400 and "set by the server" in forged.json()["message"]
    assert await agent.session("s-x").read() == []
    assert [e.data["text"] for e in await agent.session("s-acme").read()] == ["hello", "again"]

    inspector = create_inspector(world, authorize=same_tenant)
    async with _client(inspector, "globex") as globex, _client(inspector, "acme") as acme:
        assert (await globex.get("/sessions/s-acme")).status_code == 403
        assert (await acme.get("/sessions/s-acme")).status_code == 200


async def test_a_body_context_only_where_the_app_allows_it() -> None:
    agent = Agent(ScriptedModel(["hi"]), world=MemoryWorld())
    with pytest.raises(ConfigurationError):
        create_app(agent, allow_anyone=True, context=tenant_of, client_context=True)
    app = create_app(agent, allow_anyone=True, client_context=True)
    async with _client(app, "acme") as client:
        body = {"text": "hi", "session_id": "s-1", "context": {"tenant": "acme"}}
        assert (await client.post("/sessions", json=body)).status_code == 202
        bad = {"text": "hi", "session_id": "s-2", "context": ["not", "an", "object"]}
        assert (await client.post("/sessions", json=bad)).status_code == 400
    assert await agent.session("s-1").saved_context() == {"tenant": "acme"}
    assert await agent.session("s-2").read() == []


async def test_the_inspector_shows_the_context_the_refusal_and_the_typed_answer() -> None:
    import pydantic

    class Answer(pydantic.BaseModel):
        days: int

    world = MemoryWorld()
    agent = Agent(ScriptedModel(["soon", '{"days": 3}']), world=world, output_type=Answer)
    turn = agent.session("s-1", context={"tenant": "acme"}).prompt("When?")
    await agent.work(until_idle=True)
    assert await turn == Answer(days=3)
    app = create_inspector(world, allow_anyone=True)
    async with _client(app, "acme") as client:
        page = (await client.get("/sessions/s-1")).text
    assert "context" in page and "&quot;tenant&quot;: &quot;acme&quot;" in page
    assert "the answer did not match the output type" in page and "Invalid JSON" in page
    assert "answering" in page and "&quot;days&quot;: 3" in page


TENANTS = {"alice": "acme"}  # the server's directory of callers


async def test_authorize_runs_before_the_context_hook_on_create() -> None:
    """Issue 47: the context hook looks the caller up, so an unknown caller made it
    raise (a 500). Now ``authorize`` is asked first: an unknown caller gets its
    refusal, and the hook only ever sees callers it let in."""
    hooked: list[str] = []

    def tenant_of_user(request: Request) -> dict[str, str]:
        user = request.headers.get("x-user", "")
        hooked.append(user)
        return {"tenant": TENANTS[user]}  # KeyError for a caller it does not know

    def known(request: Request, session_id: str, action: str) -> bool | str:
        return request.headers.get("x-user", "") in TENANTS

    world = MemoryWorld()
    agent = Agent(ScriptedModel(["hi"]), world=world)
    app = create_app(agent, authorize=known, context=tenant_of_user)
    async with _client(app, "-") as client:
        body = {"text": "hello", "session_id": "s-1"}
        stranger = await client.post("/sessions", json=body, headers={"x-user": "mallory"})
        assert stranger.status_code == 403 and stranger.json()["error"] == "forbidden"
        assert hooked == []  # the hook never saw the stranger
        made = await client.post("/sessions", json=body, headers={"x-user": "alice"})
        assert made.status_code == 202
    assert hooked == ["alice"]
    assert await agent.session("s-1").saved_context() == {"tenant": "acme"}


async def test_an_authorize_that_takes_the_context_gets_the_hooks_refusal() -> None:
    """An ``authorize`` that decides on the new session's context needs the hook
    first: a hook that refuses an unknown caller with ``HTTPError`` is answered
    with its status, and nothing is written."""
    from fxworld.web import HTTPError

    def tenant_or_401(request: Request) -> dict[str, str]:
        user = request.headers.get("x-user", "")
        if user not in TENANTS:
            raise HTTPError(401, "unauthorized", "log in first")
        return {"tenant": TENANTS[user]}

    app = create_app(
        Agent(ScriptedModel(["hi"]), world=MemoryWorld()),
        authorize=same_tenant,
        context=tenant_or_401,
    )
    async with _client(app, "acme") as client:
        body = {"text": "hello", "session_id": "s-1"}
        stranger = await client.post("/sessions", json=body, headers={"x-user": "mallory"})
        assert stranger.status_code == 401 and stranger.json()["message"] == "log in first"
        made = await client.post("/sessions", json=body, headers={"x-user": "alice"})
        assert made.status_code == 202, made.text
