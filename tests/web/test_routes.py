"""The session routes through an ASGI client (httpx's ASGITransport), on a MemoryWorld.

httpx's ASGI transport hands a response over once the app has finished it, so
streams here are finite (``?until=turn``); open-ended streams, heartbeats and a
slow client are in ``test_stream_live.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.requests import Request

from fxworld import Agent, MemoryWorld
from fxworld.errors import ConfigurationError
from fxworld.testing import ScriptedModel
from fxworld.web import HTTPError, create_app

pytestmark = pytest.mark.timeout(60)

REPLIES = ["Hello there, friend!", "Second answer.", "Third answer."]
JSON = {"Content-Type": "application/json"}


def make_agent(world: Any = None) -> Agent:
    return Agent(ScriptedModel(REPLIES), world=world or MemoryWorld())


def parse_sse(text: str) -> list[dict[str, Any]]:
    """The events of an SSE body: each ``{"id", "event", "data"}``; comments and
    ``retry:`` ignored."""
    events = []
    for block in text.split("\n\n"):
        fields: dict[str, Any] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            fields[name] = value
        if "event" in fields:
            fields["data"] = json.loads(fields["data"])
            events.append(fields)
    return events


@pytest.fixture
async def agent() -> Agent:
    return make_agent()


@pytest.fixture
async def client(agent: Agent) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(agent, allow_anyone=True)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as c:
        yield c


async def run_until_idle(agent: Agent) -> None:
    await asyncio.wait_for(agent.work(until_idle=True, poll_interval=0.02), 30)


async def test_create_then_stream_one_turn(agent: Agent, client: httpx.AsyncClient) -> None:
    r = await client.post("/sessions", json={"text": "hi"})
    assert r.status_code == 202
    body = r.json()
    sid, cursor = body["session_id"], body["cursor"]
    await run_until_idle(agent)

    s = await client.get(f"/sessions/{sid}/stream", params={"until": "turn"})
    assert s.status_code == 200
    assert s.headers["content-type"].startswith("text/event-stream")
    assert s.headers["cache-control"].startswith("no-cache")
    events = parse_sse(s.text)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "prompt" and events[0]["data"]["text"] == "hi"
    assert events[0]["id"] == cursor  # the accepted cursor stands at the prompt
    assert kinds[-1] == "turn.finished"
    assert events[-1]["data"]["text"] == "Hello there, friend!"
    # The ids are the engine's cursors, in log order.
    logged = await agent.session(sid).read(None)
    assert [(e["id"], e["event"], e["data"]) for e in events] == [
        (ev.cursor, ev.kind, ev.data) for ev in logged
    ]


async def test_prompt_with_idempotency_key_lands_once(
    agent: Agent, client: httpx.AsyncClient
) -> None:
    sid = (await client.post("/sessions", json={"text": "first"})).json()["session_id"]
    headers = {"Idempotency-Key": "retry-me-7"}
    a = await client.post(f"/sessions/{sid}/prompts", json={"text": "again"}, headers=headers)
    b = await client.post(f"/sessions/{sid}/prompts", json={"text": "again"}, headers=headers)
    assert a.status_code == b.status_code == 202
    assert a.json() == b.json()
    prompts = [e for e in await agent.session(sid).read(None) if e.kind == "prompt"]
    assert [p.data["text"] for p in prompts] == ["first", "again"]


async def test_client_chosen_session_id_makes_create_retry_safe(
    agent: Agent, client: httpx.AsyncClient
) -> None:
    req = {"text": "hello", "session_id": "s-chosen-1"}
    headers = {"Idempotency-Key": "k1"}
    a = await client.post("/sessions", json=req, headers=headers)
    b = await client.post("/sessions", json=req, headers=headers)
    assert a.json() == b.json() and a.json()["session_id"] == "s-chosen-1"
    assert len(await agent.session("s-chosen-1").read(None)) == 1


async def test_resume_after_cursor_and_last_event_id(
    agent: Agent, client: httpx.AsyncClient
) -> None:
    sid = (await client.post("/sessions", json={"text": "hi"})).json()["session_id"]
    await run_until_idle(agent)
    full = parse_sse((await client.get(f"/sessions/{sid}/stream?until=turn")).text)
    assert len(full) >= 5
    mid = full[2]["id"]

    by_query = parse_sse(
        (await client.get(f"/sessions/{sid}/stream", params={"until": "turn", "cursor": mid})).text
    )
    assert by_query == full[3:]
    by_header = parse_sse(
        (
            await client.get(f"/sessions/{sid}/stream?until=turn", headers={"Last-Event-ID": mid})
        ).text
    )
    assert by_header == full[3:]
    # A reconnecting EventSource keeps the URL it was opened with (an older cursor)
    # and sends the newest one as Last-Event-ID: the header wins.
    both = parse_sse(
        (
            await client.get(
                f"/sessions/{sid}/stream",
                params={"until": "turn", "cursor": full[0]["id"]},
                headers={"Last-Event-ID": full[4]["id"]},
            )
        ).text
    )
    assert both == full[5:]


async def test_until_turn_stops_after_the_turn_of_that_prompt(
    agent: Agent, client: httpx.AsyncClient
) -> None:
    sid = (await client.post("/sessions", json={"text": "one"})).json()["session_id"]
    # Sent before the first turn ran: its turn comes after the first one's.
    second = (await client.post(f"/sessions/{sid}/prompts", json={"text": "two"})).json()
    await run_until_idle(agent)
    await client.post(f"/sessions/{sid}/prompts", json={"text": "three"})
    await run_until_idle(agent)
    events = parse_sse(
        (
            await client.get(
                f"/sessions/{sid}/stream", params={"until": "turn", "cursor": second["cursor"]}
            )
        ).text
    )
    ends = [e["data"]["text"] for e in events if e["event"] == "turn.finished"]
    assert ends == ["Hello there, friend!", "Second answer."]
    assert events[-1]["event"] == "turn.finished"  # the third turn is not in this stream


async def test_unknown_session_is_404(client: httpx.AsyncClient) -> None:
    r = await client.post("/sessions/s-nobody/prompts", json={"text": "hi"})
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    r = await client.get("/sessions/s-nobody/stream")
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    r = await client.get("/nowhere")
    assert r.status_code == 404


async def test_bad_ids_cursors_and_bodies_are_400(agent: Agent, client: httpx.AsyncClient) -> None:
    sid = (await client.post("/sessions", json={"text": "hi"})).json()["session_id"]
    other = (await client.post("/sessions", json={"text": "yo"})).json()

    for cursor in ["zz", "1.deadbeef", "!!", "x" * 100, other["cursor"]]:
        r = await client.get(f"/sessions/{sid}/stream", params={"cursor": cursor})
        assert r.status_code == 400, cursor
        assert r.json()["error"] == "invalid_cursor"
    r = await client.get(f"/sessions/{sid}/stream", headers={"Last-Event-ID": "nope"})
    assert r.status_code == 400
    r = await client.get(f"/sessions/{sid}/stream", params={"until": "forever"})
    assert r.status_code == 400

    r = await client.get("/sessions/bad%20id/stream")
    assert r.status_code == 400 and r.json()["error"] == "invalid_session_id"
    r = await client.post("/sessions", json={"text": "x", "session_id": "no/slashes"})
    assert r.status_code == 400

    deep = b"[" * 100_000 + b"]" * 100_000
    for content in [b"not json", b"[1,2]", b'{"text": 5}', b'{"text": "   "}', b"\xff\xfe", deep]:
        r = await client.post(f"/sessions/{sid}/prompts", content=content, headers=JSON)
        assert r.status_code == 400, content[:20]
    r = await client.post(
        f"/sessions/{sid}/prompts", json={"text": "x"}, headers={"Idempotency-Key": "k" * 500}
    )
    assert r.status_code == 400
    # None of the refused requests left anything in the log.
    assert [e.kind for e in await agent.session(sid).read(None)] == ["prompt"]


async def test_oversized_prompt_is_413_and_not_saved(agent: Agent) -> None:
    app = create_app(agent, allow_anyone=True, max_prompt_bytes=1000)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        sid = (await client.post("/sessions", json={"text": "hi"})).json()["session_id"]
        r = await client.post(f"/sessions/{sid}/prompts", json={"text": "x" * 2000})
        assert r.status_code == 413 and r.json()["error"] == "too_large"

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as read
            yield b'{"text": "'
            for _ in range(10):
                yield b"y" * 200
            yield b'"}'

        r = await client.post(f"/sessions/{sid}/prompts", content=chunks(), headers=JSON)
        assert r.status_code == 413
        r = await client.post("/sessions", json={"text": "z" * 5000})
        assert r.status_code == 413
        assert [e.kind for e in await agent.session(sid).read(None)] == ["prompt"]


async def test_a_prompt_over_the_worlds_entry_limit_is_413_naming_both_and_not_saved() -> None:
    agent = make_agent(MemoryWorld(max_entry_bytes=2000))
    app = create_app(agent, allow_anyone=True)  # its max_prompt_bytes: far above 2000
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        r = await client.post("/sessions", json={"text": "x" * 3000, "session_id": "s-big"})
        assert r.status_code == 413 and r.json()["error"] == "too_large"
        message = r.json()["message"]
        assert "over the limit of 2000 bytes" in message and "entry of 30" in message
    assert await agent.session("s-big").read(None) == []


class BrokenWorld(MemoryWorld):
    """A world whose reads fail with an unexpected error carrying internals."""

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> Any:
        raise RuntimeError("db password=hunter2 at /srv/internal/path.py line 42")


async def test_unexpected_errors_are_bare_500_without_trace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = create_app(make_agent(BrokenWorld()), allow_anyone=True)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        r = await client.get("/sessions/s-x/stream")
        assert r.status_code == 500
        assert r.json() == {"error": "internal", "message": "internal server error"}
        r2 = await client.post("/sessions/s-x/prompts", json={"text": "hi"})
        assert r2.status_code == 500
        for text in (r.text, r2.text):
            assert "Traceback" not in text and "hunter2" not in text and "internal/" not in text
    # ...but the operator sees it in the log.
    assert "hunter2" in caplog.text


def test_routes_refuse_to_start_without_authorize() -> None:
    with pytest.raises(ConfigurationError, match="allow_anyone"):
        create_app(make_agent())
    with pytest.raises(ConfigurationError):
        create_app(make_agent(), authorize="yes")  # type: ignore[arg-type]


async def test_authorize_is_asked_for_each_action() -> None:
    agent = make_agent()
    calls: list[tuple[str, str]] = []

    async def authorize(request: Request, session_id: str, action: str) -> bool:
        calls.append((session_id, action))
        token = request.headers.get("authorization")
        if token is None:
            raise HTTPError(401, "unauthorized", "log in first")
        return token == "Bearer alice"

    app = create_app(agent, authorize=authorize)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        alice = {"Authorization": "Bearer alice"}
        r = await client.post("/sessions", json={"text": "hi"}, headers=alice)
        assert r.status_code == 202
        sid = r.json()["session_id"]
        assert (
            await client.post(f"/sessions/{sid}/prompts", json={"text": "x"}, headers=alice)
        ).status_code == 202
        await run_until_idle(agent)
        assert (
            await client.get(f"/sessions/{sid}/stream?until=turn", headers=alice)
        ).status_code == 200
        assert calls == [(sid, "create"), (sid, "prompt"), (sid, "stream")]

        bob = {"Authorization": "Bearer bob"}
        r = await client.get(f"/sessions/{sid}/stream", headers=bob)
        assert r.status_code == 403 and r.json()["error"] == "forbidden"
        r = await client.post(f"/sessions/{sid}/prompts", json={"text": "evil"}, headers=bob)
        assert r.status_code == 403
        r = await client.post("/sessions", json={"text": "hi"})
        assert r.status_code == 401 and r.json()["message"] == "log in first"
        # Refused before anything was read or written: bob's prompt is not in the log.
        texts = [e.data["text"] for e in await agent.session(sid).read(None) if e.kind == "prompt"]
        assert texts == ["hi", "x"]
        # An unknown session is refused by authorize before it is looked up (no probing).
        r = await client.get("/sessions/s-unknown/stream", headers=bob)
        assert r.status_code == 403


async def test_mounted_under_a_prefix_in_another_app() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    agent = make_agent()
    outer = Starlette(routes=[Mount("/agent", app=create_app(agent, allow_anyone=True))])
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=outer), base_url="http://test"
    ) as client:
        r = await client.post("/agent/sessions", json={"text": "hi"})
        assert r.status_code == 202
        await run_until_idle(agent)
        s = await client.get(f"/agent/sessions/{r.json()['session_id']}/stream?until=turn")
        assert parse_sse(s.text)[-1]["event"] == "turn.finished"


async def test_the_202_stream_path_is_absolute_from_the_mount() -> None:
    """``stream`` is a path from the server's root: mounted at ``/agent`` behind a
    server whose ASGI ``root_path`` is ``/api``, it is ``/api/agent/sessions/..``,
    and a client that follows it gets the stream (resolved against the prompt
    route, a relative path would give ``/sessions/{id}/sessions/{id}/stream``)."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    agent = make_agent()
    alone = create_app(agent, allow_anyone=True)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=alone), base_url="http://test"
    ) as client:
        r = await client.post("/sessions", json={"text": "hi"})
        assert r.json()["stream"] == f"/sessions/{r.json()['session_id']}/stream"

    outer = Starlette(routes=[Mount("/agent", app=create_app(agent, allow_anyone=True))])
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=outer, root_path="/api"), base_url="http://test"
    ) as client:
        created = (await client.post("/api/agent/sessions", json={"text": "hi"})).json()
        sid = created["session_id"]
        assert created["stream"] == f"/api/agent/sessions/{sid}/stream"
        prompted = await client.post(f"/api/agent/sessions/{sid}/prompts", json={"text": "more"})
        assert prompted.json()["stream"] == created["stream"]
        await run_until_idle(agent)
        s = await client.get(
            created["stream"], params={"cursor": created["cursor"], "until": "turn"}
        )
        assert s.status_code == 200 and parse_sse(s.text)[-1]["event"] == "turn.finished"
