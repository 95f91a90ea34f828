"""Open-ended streams: a real uvicorn server in this process, and a raw ASGI call
for the slow client."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import httpx
import pytest
import uvicorn

from fxworld import Agent, Entry, MemoryWorld, NewEntry
from fxworld.testing import ScriptedModel
from fxworld.web import create_app
from tests.support.ports import free_port

pytestmark = pytest.mark.timeout(60)


class CountingWorld(MemoryWorld):
    """A MemoryWorld that counts what its followers handed out, and how many run."""

    def __init__(self) -> None:
        super().__init__()
        self.followed = 0
        self.following = 0
        self.reads = 0

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        self.reads += 1
        return await super().read(session_id, after, limit=limit)

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Entry]:
        inner = super().follow(session_id, after)

        async def counted() -> AsyncIterator[Entry]:
            self.following += 1
            try:
                async for entry in inner:
                    self.followed += 1
                    yield entry
            finally:
                self.following -= 1

        return counted()


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 20)


async def test_live_stream_heartbeats_and_new_events() -> None:
    world = CountingWorld()
    agent = Agent(ScriptedModel(["first", "second"]), world=world)
    app = create_app(agent, allow_anyone=True, heartbeat=0.3)
    async with serving(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as client:
        sid = (await client.post("/sessions", json={"text": "one"})).json()["session_id"]
        await agent.work(until_idle=True, poll_interval=0.02)
        lines: list[str] = []
        async with client.stream("GET", f"/sessions/{sid}/stream") as r:
            assert r.status_code == 200
            it = r.aiter_lines()
            # The first turn is replayed, then the idle stream sends comment heartbeats.
            while lines.count(": heartbeat") < 2:
                lines.append(await asyncio.wait_for(anext(it), 10))
            assert lines[0] == "retry: 1000"
            assert "event: turn.finished" in lines
            # A prompt sent now arrives on the open stream as the worker saves it.
            await client.post(f"/sessions/{sid}/prompts", json={"text": "two"})
            worker = asyncio.create_task(agent.work(until_idle=True, poll_interval=0.02))
            while lines.count("event: turn.finished") < 2:
                lines.append(await asyncio.wait_for(anext(it), 10))
            lines.append(await asyncio.wait_for(anext(it), 10))  # its data line
            assert '"text":"second"' in lines[-1]
            await worker
        events = [line for line in lines if line.startswith("event: ")]
        assert events.count("event: turn.finished") == 2
        assert events.count("event: prompt") == 2
        # The client went away: the server stops following the log.
        for _ in range(200):
            if world.following == 0:
                break
            await asyncio.sleep(0.05)
        assert world.following == 0


async def test_until_turn_waits_for_the_running_turn_then_closes() -> None:
    agent = Agent(ScriptedModel(["slowly streamed"], delay=0.1), world=MemoryWorld())
    app = create_app(agent, allow_anyone=True)
    async with serving(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as client:
        r = await client.post("/sessions", json={"text": "one"})
        sid, cursor = r.json()["session_id"], r.json()["cursor"]
        worker = asyncio.create_task(agent.work(until_idle=True, poll_interval=0.02))
        async with client.stream(
            "GET", f"/sessions/{sid}/stream", params={"until": "turn", "cursor": cursor}
        ) as s:
            lines = [line async for line in s.aiter_lines()]  # ends by itself
        await worker
        events = [line for line in lines if line.startswith("event: ")]
        assert events[0] == "event: fence" and events[-1] == "event: turn.finished"


async def test_slow_client_does_not_make_the_server_buffer() -> None:
    """A client that stops reading: the server pulls no further entries from the
    log than the frames it could hand over, plus one; the rest stay in the world."""
    world = CountingWorld()
    agent = Agent(ScriptedModel(["x"]), world=world)
    sid = "s-big"
    for i in range(50):
        await world.append(sid, [NewEntry("note", {"i": i, "pad": "p" * 1000})] * 100)
    app = create_app(agent, allow_anyone=True)

    sent_bodies = 0
    blocked = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # never disconnects, never sends anything
        raise AssertionError("unreachable")

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal sent_bodies
        if message["type"] == "http.response.body" and message.get("body"):
            sent_bodies += 1
            if sent_bodies >= 5:  # the client's buffers are full from here on
                blocked.set()
                await asyncio.Event().wait()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": f"/sessions/{sid}/stream",
        "raw_path": f"/sessions/{sid}/stream".encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"test")],
        "client": ("127.0.0.1", 1234),
        "server": ("test", 80),
    }
    task = asyncio.create_task(app(scope, receive, send))
    try:
        await asyncio.wait_for(blocked.wait(), 10)
        await asyncio.sleep(0.5)  # time to run ahead, if it would
        assert sent_bodies == 5
        # 5 frames went out (the retry field and 4 events); the server holds at
        # most the one event it is trying to send and the one after it.
        assert world.followed <= 4 + 2
        # ...and read only the log's first page, not the 5000 entries behind it.
        assert world.reads <= 3
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_close_streams_ends_open_streams_cleanly() -> None:
    agent = Agent(ScriptedModel(["x"]), world=MemoryWorld())
    app = create_app(agent, allow_anyone=True)
    async with serving(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as client:
        sid = (await client.post("/sessions", json={"text": "one"})).json()["session_id"]
        async with client.stream("GET", f"/sessions/{sid}/stream") as r:
            it = r.aiter_lines()
            while await asyncio.wait_for(anext(it), 10) != "event: prompt":
                pass
            app.state.close_streams()  # what `fxworld serve` does on SIGTERM
            rest = [line async for line in it]  # ends, with no error
        assert not any(line.startswith("event: ") for line in rest)
