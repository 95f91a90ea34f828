"""The HTTP face as an attacker and a careless deployer try it (issue 16): each
test is named after a finding of the audit of 0.1, and failed there."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from fxworld import Agent, MemoryWorld, tool
from fxworld.errors import BackendUnavailable, InvalidArgument
from fxworld.models.base import ModelError, ModelEvent, ModelRequest
from fxworld.testing import ScriptedModel
from fxworld.web import HTTPError, create_app, wake_handler

pytestmark = pytest.mark.timeout(60)

JSON = {"Content-Type": "application/json"}


def client_for(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


def make_agent(**kwargs: Any) -> Agent:
    kwargs.setdefault("world", MemoryWorld())
    return Agent(kwargs.pop("model", ScriptedModel(["ok", "ok", "ok"])), **kwargs)


async def prompts(agent: Agent, sid: str) -> list[str]:
    return [e.data["text"] for e in await agent.session(sid).read(None) if e.kind == "prompt"]


def parse_sse(text: str) -> list[dict[str, Any]]:
    events = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
        if "event" in fields:
            events.append({**fields, "data": json.loads(fields["data"])})
    return events


async def run_until_idle(agent: Agent) -> None:
    await asyncio.wait_for(agent.work(until_idle=True, poll_interval=0.02), 30)


# -- create never writes into an existing session (finding 2) ------------------------


def owner_policy() -> Callable[[Request, str, str], Awaitable[bool]]:
    """A common policy: anyone logged in may create; only the owner may prompt or
    stream (sessions are owned by whoever created them first)."""
    owners: dict[str, str] = {}

    async def authorize(request: Request, session_id: str, action: str) -> bool:
        user = request.headers.get("x-user")
        if user is None:
            raise HTTPError(401, "unauthorized", "log in first")
        if action == "create":
            owners.setdefault(session_id, user)
            return True
        return owners.get(session_id) == user

    return authorize


async def test_create_never_writes_into_an_existing_session() -> None:
    agent = make_agent()
    alice, mallory = {"x-user": "alice"}, {"x-user": "mallory"}
    async with client_for(create_app(agent, authorize=owner_policy())) as client:
        create = {"text": "my card is 4111", "session_id": "s-alice"}
        r = await client.post("/sessions", json=create, headers={**alice, "Idempotency-Key": "a1"})
        assert r.status_code == 202
        first = r.json()
        # The exact original create, repeated (a retry): the same answer, nothing new.
        again = await client.post(
            "/sessions", json=create, headers={**alice, "Idempotency-Key": "a1"}
        )
        assert again.status_code == 202 and again.json() == first
        # Anything else naming that session is refused, whoever sends it.
        for body, headers in [
            ({"text": "evil", "session_id": "s-alice"}, mallory),
            ({"text": "evil", "session_id": "s-alice"}, {**mallory, "Idempotency-Key": "m1"}),
            ({"text": "evil", "session_id": "s-alice"}, {**mallory, "Idempotency-Key": "a1"}),
            ({"text": "my card is 4111", "session_id": "s-alice"}, alice),  # no key
            (
                {"text": "second create", "session_id": "s-alice"},
                {**alice, "Idempotency-Key": "a2"},
            ),
        ]:
            r = await client.post("/sessions", json=body, headers=headers)
            assert r.status_code == 409, (body, headers, r.text)
        assert await prompts(agent, "s-alice") == ["my card is 4111"]


async def test_create_cannot_take_a_key_first_for_another_session() -> None:
    """Mallory may not prompt alice's session, so she cannot use its next key first
    (through create) and make alice's prompt vanish."""
    agent = make_agent()
    alice, mallory = {"x-user": "alice"}, {"x-user": "mallory"}
    async with client_for(create_app(agent, authorize=owner_policy())) as client:
        r = await client.post("/sessions", json={"text": "hi", "session_id": "s-a"}, headers=alice)
        assert r.status_code == 202
        steal = {**mallory, "Idempotency-Key": "alice-next"}
        r = await client.post("/sessions", json={"text": "x", "session_id": "s-a"}, headers=steal)
        assert r.status_code == 409
        r = await client.post("/sessions/s-a/prompts", json={"text": "x"}, headers=steal)
        assert r.status_code == 403
        mine = {**alice, "Idempotency-Key": "alice-next"}
        r = await client.post("/sessions/s-a/prompts", json={"text": "pay 10"}, headers=mine)
        assert r.status_code == 202
        assert await prompts(agent, "s-a") == ["hi", "pay 10"]


async def test_idempotency_key_reused_with_another_body_is_409() -> None:
    agent = make_agent()
    async with client_for(create_app(agent, allow_anyone=True)) as client:
        sid = (await client.post("/sessions", json={"text": "hi"})).json()["session_id"]
        key = {"Idempotency-Key": "transfer-1"}
        a = await client.post(
            f"/sessions/{sid}/prompts", json={"text": "transfer $10"}, headers=key
        )
        b = await client.post(
            f"/sessions/{sid}/prompts", json={"text": "transfer $10"}, headers=key
        )
        assert a.status_code == b.status_code == 202 and a.json() == b.json()
        c = await client.post(
            f"/sessions/{sid}/prompts", json={"text": "transfer $9999"}, headers=key
        )
        assert c.status_code == 409 and c.json()["error"] == "key_reused"
        assert await prompts(agent, sid) == ["hi", "transfer $10"]


# -- authorize grants only on True or a str naming the caller (finding 3) ----------------
# (A str that names the caller allows since issue 47: the actor of decisions and stops.
# A str that cannot name anyone, empty or blank, is still a configuration error.)


async def _never_called(request: Request, session_id: str, action: str) -> bool:
    return True


@pytest.mark.parametrize(
    "answer",
    ["", "  ", 1, None, Response(status_code=401), _never_called],
    ids=["str-empty", "str-blank", "int", "none", "response", "uncalled-async"],
)
async def test_authorize_grants_only_on_true_or_a_name(
    answer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    agent = make_agent()
    sid = (await agent.session("s-victim").prompt("secret").accepted).session_id

    def authorize(request: Request, session_id: str, action: str) -> Any:
        return answer

    async with client_for(create_app(agent, authorize=authorize)) as client:
        r1 = await client.post(f"/sessions/{sid}/prompts", json={"text": "evil"})
        r2 = await client.get(f"/sessions/{sid}/stream?until=turn")
        r3 = await client.post("/sessions", json={"text": "evil"})
        for r in (r1, r2, r3):
            assert r.status_code == 500 and r.json()["error"] == "internal"
    assert await prompts(agent, sid) == ["secret"]
    assert "authorize returned" in caplog.text


async def test_authorize_false_is_403_and_async_true_allows() -> None:
    agent = make_agent()

    async def authorize(request: Request, session_id: str, action: str) -> bool:
        return request.headers.get("x-user") == "alice"

    async with client_for(create_app(agent, authorize=authorize)) as client:
        assert (await client.post("/sessions", json={"text": "x"})).status_code == 403
        r = await client.post("/sessions", json={"text": "x"}, headers={"x-user": "alice"})
        assert r.status_code == 202


async def test_authorize_http_exception_keeps_its_status() -> None:
    agent = make_agent()

    def authorize(request: Request, session_id: str, action: str) -> bool:
        raise HTTPException(401, "log in", headers={"WWW-Authenticate": "Bearer"})

    async with client_for(create_app(agent, authorize=authorize)) as client:
        r = await client.post("/sessions", json={"text": "x"})
        assert r.status_code == 401
        assert r.json() == {"error": "unauthorized", "message": "log in"}
        assert r.headers["www-authenticate"] == "Bearer"
        r = await client.get("/sessions/s-x/stream")
        assert r.status_code == 401


async def test_authorize_runs_before_the_body_is_read() -> None:
    agent = make_agent()

    def authorize(request: Request, session_id: str, action: str) -> bool:
        if "authorization" not in request.headers:
            raise HTTPError(401, "unauthorized", "log in first")
        return True

    app = create_app(agent, authorize=authorize, max_prompt_bytes=100)
    async with client_for(app) as client:
        for content in [b"not json", b"[1]", b"x" * 1000, b'{"text": "hi", "session_id": "a b"}']:
            r = await client.post("/sessions", content=content, headers=JSON)
            assert r.status_code == 401, content[:20]
            r = await client.post("/sessions/s-x/prompts", content=content, headers=JSON)
            assert r.status_code == 401, content[:20]


def test_http_error_refuses_a_status_outside_400_599() -> None:
    for status in (0, 101, 200, 302, 399, 600, 999):
        with pytest.raises(InvalidArgument, match=r"400\.\.599"):
            HTTPError(status, "x", "y")
    assert HTTPError(418, "teapot", "short and stout").status == 418


# -- no CSRF through simple requests (finding 6) ---------------------------------------


async def test_post_routes_accept_only_json() -> None:
    agent = make_agent()
    async with client_for(create_app(agent, allow_anyone=True)) as client:
        sid = (await client.post("/sessions", json={"text": "hi"})).json()["session_id"]
        body = json.dumps({"text": "transfer everything"})
        for ctype in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data",
            None,
        ]:
            headers = {"Origin": "https://evil.example"}
            if ctype is not None:
                headers["Content-Type"] = ctype
            r = await client.post(f"/sessions/{sid}/prompts", content=body, headers=headers)
            assert r.status_code == 415, ctype
            r = await client.post("/sessions", content=body, headers=headers)
            assert r.status_code == 415, ctype
        ok = {"Content-Type": "application/json; charset=utf-8"}
        r = await client.post(f"/sessions/{sid}/prompts", content=body, headers=ok)
        assert r.status_code == 202
        assert await prompts(agent, sid) == ["hi", "transfer everything"]


async def test_allowed_origins_checks_origin() -> None:
    agent = make_agent()
    app = create_app(agent, allow_anyone=True, allowed_origins=["https://app.example"])
    async with client_for(app) as client:
        evil = {"Origin": "https://evil.example"}
        r = await client.post("/sessions", json={"text": "x"}, headers=evil)
        assert r.status_code == 403 and r.json()["error"] == "forbidden_origin"
        r = await client.post(
            "/sessions", json={"text": "x"}, headers={"Origin": "https://app.example"}
        )
        assert r.status_code == 202
        sid = r.json()["session_id"]
        assert (await client.get(f"/sessions/{sid}/stream", headers=evil)).status_code == 403
        r = await client.post("/sessions", json={"text": "from curl"})  # no Origin: not a browser
        assert r.status_code == 202


# -- no secret reaches a client (finding 4) ---------------------------------------------

DB_URL = "postgresql://app:S3cretPassw0rd@db.internal:5432/shop"
API_KEY = "sk-live-4f8a9b2c3d4e5f6a7b8c9d0e"


@tool
async def charge(order: str) -> str:
    """Charges an order."""
    raise ConnectionError(f"could not connect to {DB_URL}; Authorization: Bearer tok-9f8e7d6c5b")


async def test_tool_errors_are_stored_and_streamed_scrubbed() -> None:
    model = ScriptedModel([{"tool": "charge", "input": {"order": "A-1"}}, "Sorry."])
    agent = make_agent(model=model, tools=[charge])
    async with client_for(create_app(agent, allow_anyone=True)) as client:
        sid = (await client.post("/sessions", json={"text": "charge A-1"})).json()["session_id"]
        await run_until_idle(agent)
        stream = (await client.get(f"/sessions/{sid}/stream?until=turn")).text
    stored = json.dumps([e.data for e in await agent.session(sid).read(None)])
    for text in (stream, stored):
        assert "S3cretPassw0rd" not in text and "tok-9f8e7d6c5b" not in text
    finished = [e for e in parse_sse(stream) if e["event"] == "tool.finished"]
    assert finished[0]["data"]["is_error"] is True
    assert "could not connect to postgresql://app:***@db.internal" in finished[0]["data"]["output"]


class LeakyModel:
    """A model adapter with a bug: its exception quotes a request header."""

    name = "leaky"

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        raise self.error
        yield  # pragma: no cover


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError(f"bad request headers {{'x-api-key': '{API_KEY}'}}"),
        ModelError(f"provider said: invalid x-api-key: {API_KEY}", retryable=False),
    ],
    ids=["adapter-bug", "model-error"],
)
async def test_model_errors_reach_clients_without_secrets(
    error: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    agent = make_agent(model=LeakyModel(error))
    async with client_for(create_app(agent, allow_anyone=True)) as client:
        sid = (await client.post("/sessions", json={"text": "hi"})).json()["session_id"]
        await run_until_idle(agent)
        stream = (await client.get(f"/sessions/{sid}/stream?until=turn")).text
    failed = parse_sse(stream)[-1]
    assert failed["event"] == "turn.failed"
    assert API_KEY not in stream and API_KEY[3:15] not in stream
    assert API_KEY not in json.dumps([e.data for e in await agent.session(sid).read(None)])
    if isinstance(error, RuntimeError):  # a short message; the details are in the log
        assert failed["data"]["error"].startswith("the model call failed (RuntimeError)")
        assert API_KEY in caplog.text
    else:
        assert failed["data"]["error"] == "provider said: invalid x-api-key: ***"


async def test_visible_drops_or_rewrites_streamed_entries() -> None:
    model = ScriptedModel([{"tool": "charge", "input": {"order": "A-1"}}, "Sorry."])
    agent = make_agent(model=model, tools=[charge])

    def visible(request: Request, event: Any) -> Any:
        if event.kind == "fence":
            return None
        if event.kind == "tool.started":
            return type(event)(event.cursor, event.kind, {**event.data, "input": "(hidden)"})
        return event

    async with client_for(create_app(agent, allow_anyone=True, visible=visible)) as client:
        sid = (await client.post("/sessions", json={"text": "charge A-1"})).json()["session_id"]
        await run_until_idle(agent)
        events = parse_sse((await client.get(f"/sessions/{sid}/stream?until=turn")).text)
    kinds = [e["event"] for e in events]
    assert "fence" not in kinds and kinds[-1] == "turn.finished"
    started = [e for e in events if e["event"] == "tool.started"]
    assert started and started[0]["data"]["input"] == "(hidden)"
    # The cursors are the log's: a reconnect resumes where the client was.
    logged = {e.cursor for e in await agent.session(sid).read(None)}
    assert {e["id"] for e in events} <= logged


# -- the low findings ----------------------------------------------------------------


async def raw_post(app: Any, path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> int:
    """POST through a bare ASGI call, with headers exactly as given (httpx would
    set Content-Length itself)."""
    status = 0
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"test"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }
    await app(scope, receive, send)
    return status


async def test_odd_content_length_is_400() -> None:
    agent = make_agent()
    app = create_app(agent, allow_anyone=True)
    body = b'{"text": "hi"}'
    ctype = (b"content-type", b"application/json")
    for length in [
        b"\xc2\xb2",
        "١٤".encode(),
        b"+14",
        b"-1",
        b"14, 14",
        b"1e3",
        b"0x0e",
        b"9" * 40,
    ]:
        status = await raw_post(app, "/sessions", [ctype, (b"content-length", length)], body)
        assert status == 400, length
    two = [ctype, (b"content-length", b"14"), (b"content-length", b"15")]
    assert await raw_post(app, "/sessions", two, body) == 400
    ok = [ctype, (b"content-length", b"14")]
    assert await raw_post(app, "/sessions", ok, body) == 202
    wake = wake_handler(agent, secret="s" * 32)
    assert await raw_post(wake, "/", [(b"content-length", b"\xc2\xb2")], body) == 400


class DownWorld(MemoryWorld):
    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> Any:
        raise BackendUnavailable("the database is restarting")


async def test_503_carries_retry_after() -> None:
    app = create_app(make_agent(world=DownWorld()), allow_anyone=True)
    async with client_for(app) as client:
        r = await client.get("/sessions/s-x/stream")
        assert r.status_code == 503 and r.json()["error"] == "unavailable"
        assert int(r.headers["retry-after"]) >= 1


async def test_streams_end_after_their_lifetime_and_reauthorize() -> None:
    """An open stream ends after ``stream_lifetime``; the client reconnects (an
    EventSource does so by itself) and is asked for again, so revoked access stops."""
    agent = make_agent()
    allowed = {"yes": True}

    def authorize(request: Request, session_id: str, action: str) -> bool:
        return allowed["yes"]

    app = create_app(agent, authorize=authorize, stream_lifetime=0.5, heartbeat=0.1)
    from tests.web.test_stream_live import serving

    async with serving(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as client:
        sid = (await client.post("/sessions", json={"text": "one"})).json()["session_id"]
        loop = asyncio.get_running_loop()
        began = loop.time()
        async with client.stream("GET", f"/sessions/{sid}/stream") as s:
            lines = [line async for line in s.aiter_lines()]  # ends by itself
        assert 0.4 < loop.time() - began < 5
        assert "event: prompt" in lines
        allowed["yes"] = False  # access revoked: the reconnect is refused
        r = await client.get(f"/sessions/{sid}/stream", headers={"Last-Event-ID": "1"})
        assert r.status_code == 403
