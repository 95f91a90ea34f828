"""The signed wake handler: refuses what is not signed, fresh and intact; runs due
turns for what is, stopping before the invocation's deadline."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from fxworld import Agent, MemoryWorld, tool
from fxworld.errors import ConfigurationError
from fxworld.testing import Reply, ScriptedModel
from fxworld.web import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    WakeHandler,
    signed_headers,
    verify,
    wake_handler,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

SECRET = "test-secret-0123456789abcdef"


@tool(idempotent=True)
async def slow_lookup(id: str) -> str:
    """Takes a while."""
    await asyncio.sleep(0.4)
    return f"order {id}: shipped"


def make_agent(delay: float = 0.0) -> Agent:
    script: list[Reply] = [{"tool": "slow_lookup", "input": {"id": "A-1"}}, "It shipped."]
    return Agent(ScriptedModel(script, delay=delay), tools=[slow_lookup], world=MemoryWorld())


async def kinds(agent: Agent, sid: str) -> list[str]:
    return [e.kind for e in await agent.session(sid).read(None)]


@pytest.fixture
async def agent() -> Agent:
    return make_agent()


@pytest.fixture
async def client(agent: Agent) -> AsyncIterator[httpx.AsyncClient]:
    handler = wake_handler(agent, secret=SECRET)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=handler), base_url="http://test"
    ) as c:
        yield c


def test_signatures_round_trip_and_reject_changes() -> None:
    body = b'{"session_id": "s-1"}'
    headers = signed_headers(SECRET, body)
    assert verify(SECRET, body, headers)
    assert not verify(SECRET, body + b" ", headers)
    assert not verify("another-secret-0123456789", body, headers)
    earlier = str(int(headers[TIMESTAMP_HEADER]) - 1)
    assert not verify(SECRET, body, {**headers, TIMESTAMP_HEADER: earlier})
    assert not verify(SECRET, body, {TIMESTAMP_HEADER: headers[TIMESTAMP_HEADER]})
    assert not verify(
        SECRET, body, {**headers, TIMESTAMP_HEADER: "\uff11\uff12\uff13"}
    )  # not ASCII
    old = signed_headers(SECRET, body, timestamp=int(time.time()) - 301)
    assert not verify(SECRET, body, old)
    assert verify(SECRET, body, signed_headers(SECRET, body, timestamp=int(time.time()) - 290))


async def test_unsigned_or_stale_requests_are_401_and_run_nothing(
    agent: Agent, client: httpx.AsyncClient
) -> None:
    sid = (await agent.session().prompt("where is A-1?").accepted).session_id
    body = json.dumps({"session_id": sid}).encode()
    now = int(time.time())
    refused = [
        {},  # unsigned
        signed_headers("wrong-secret-0123456789abcdef", body),
        signed_headers(SECRET, body, timestamp=now - 6 * 60),  # replayed later
        signed_headers(SECRET, body, timestamp=now + 6 * 60),
        {**signed_headers(SECRET, body), SIGNATURE_HEADER: "sha256=" + "0" * 64},
        {TIMESTAMP_HEADER: str(now), SIGNATURE_HEADER: "garbage"},
    ]
    for headers in refused:
        r = await client.post("/", content=body, headers=headers)
        assert r.status_code == 401, headers
        assert r.json()["error"] == "unauthorized"
    # A valid signature over a different body does not sign this one.
    r = await client.post("/", content=body + b" ", headers=signed_headers(SECRET, body))
    assert r.status_code == 401
    await asyncio.sleep(0.2)
    assert await kinds(agent, sid) == ["prompt"]  # nothing ran

    r = await client.post("/", content=body, headers=signed_headers(SECRET, body))
    assert r.status_code == 200
    assert r.json()["status"] == "done"
    assert (await kinds(agent, sid))[-1] == "turn.finished"


async def test_a_cron_tick_names_no_session_and_runs_what_is_due(
    agent: Agent, client: httpx.AsyncClient
) -> None:
    sids = [(await agent.session().prompt(f"q{i}").accepted).session_id for i in range(3)]
    r = await client.post("/", content=b"", headers=signed_headers(SECRET, b""))
    assert r.status_code == 200 and r.json()["status"] == "idle"
    for sid in sids:
        assert (await kinds(agent, sid))[-1] == "turn.finished"


async def test_a_session_whose_turn_is_not_over_asks_to_be_delivered_again(
    agent: Agent, client: httpx.AsyncClient
) -> None:
    """A worker died holding the session's lease: nothing can run it yet, so the
    answer is retryable (a push queue redelivers) until the turn is over."""
    sid = (await agent.session().prompt("where is A-1?").accepted).session_id
    world = await agent.ready()
    lease = await world.take_wake(lease=1.0)  # a worker that then died
    assert lease is not None and lease.session_id == sid
    body = json.dumps({"session_id": sid}).encode()
    r = await client.post("/", content=body, headers=signed_headers(SECRET, body))
    assert r.status_code == 503
    assert r.json()["status"] == "pending"
    assert int(r.headers["retry-after"]) >= 1
    await wait_until(lambda: datetime.now(UTC) > lease.expires_at, 10)  # the lease ran out
    r = await client.post("/", content=body, headers=signed_headers(SECRET, body))
    assert r.status_code == 200 and r.json()["status"] == "done"


async def test_other_methods_and_big_bodies_are_refused(client: httpx.AsyncClient) -> None:
    assert (await client.get("/")).status_code == 405
    big = b"x" * (65 * 1024)
    r = await client.post("/", content=big, headers=signed_headers(SECRET, big))
    assert r.status_code == 413


async def test_a_long_turn_yields_before_the_deadline_and_continues_next_time() -> None:
    agent = make_agent(delay=0.2)
    # Each invocation may run 1.2 s: less than the whole turn (model 0.2 s, tool
    # 0.4 s, text 4 x 0.2 s), so the first one must stop at a step boundary.
    handler = wake_handler(agent, secret=SECRET, time_limit=1.6, margin=0.4)
    sid = (await agent.session().prompt("where is A-1?").accepted).session_id
    body = json.dumps({"session_id": sid}).encode()
    statuses = []
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=handler), base_url="http://test"
    ) as client:
        for _ in range(10):
            started = time.monotonic()
            r = await client.post("/", content=body, headers=signed_headers(SECRET, body))
            assert time.monotonic() - started < 1.6 + 1.0  # answered within its time limit
            statuses.append((r.status_code, r.json()["status"]))
            if r.status_code == 200:
                break
            assert r.headers["retry-after"] == "1"
    log = await kinds(agent, sid)
    assert statuses[0] == (503, "deadline")  # not over: deliver the message again
    assert statuses[-1] == (200, "done")
    assert "turn.yielded" in log
    assert log[-1] == "turn.finished"
    assert log.count("turn.started") == 1  # one turn, carried over invocations
    assert log.count("fence") >= 2


def test_a_secret_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    agent = make_agent()
    monkeypatch.delenv("FXWORLD_WAKE_SECRET", raising=False)
    with pytest.raises(ConfigurationError, match="FXWORLD_WAKE_SECRET"):
        wake_handler(agent)
    with pytest.raises(ConfigurationError, match="at least 16"):
        wake_handler(agent, secret="short")
    monkeypatch.setenv("FXWORLD_WAKE_SECRET", SECRET)
    handler = wake_handler(agent)
    assert isinstance(handler, WakeHandler)
    assert SECRET not in repr(handler)


async def test_wake_replays_share_one_run() -> None:
    """Ten copies of one signed request (a replay) start one worker, not ten: each
    copy gets the answer of the run that is under way."""
    agent = make_agent(delay=0.1)
    runs = 0
    real = agent.work

    async def counted(**kwargs: Any) -> Any:
        nonlocal runs
        runs += 1
        return await real(**kwargs)

    agent.work = counted  # type: ignore[method-assign]
    sid = (await agent.session().prompt("where is A-1?").accepted).session_id
    body = json.dumps({"session_id": sid}).encode()
    headers = signed_headers(SECRET, body)
    handler = wake_handler(agent, secret=SECRET)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=handler), base_url="http://test"
    ) as client:
        answers = await asyncio.gather(
            *[client.post("/", content=body, headers=headers) for _ in range(10)]
        )
        later = await client.post("/", content=body, headers=headers)  # replayed after it
    assert runs == 1
    assert {(r.status_code, r.json()["status"]) for r in answers} == {(200, "done")}
    assert later.status_code == 200 and later.json() == answers[0].json()


async def test_wake_runs_per_process_are_capped() -> None:
    agent = make_agent(delay=0.3)
    handler = WakeHandler(agent, secret=SECRET, max_runs=2)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=handler), base_url="http://test"
    ) as client:
        bodies = [json.dumps({"tick": i}).encode() for i in range(4)]  # four distinct requests
        await agent.session().prompt("where is A-1?").accepted
        answers = await asyncio.gather(
            *[client.post("/", content=b, headers=signed_headers(SECRET, b)) for b in bodies]
        )
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [200, 200, 503, 503]
    busy = [r for r in answers if r.status_code == 503]
    assert all(r.json()["error"] == "busy" and int(r.headers["retry-after"]) >= 1 for r in busy)
    with pytest.raises(ConfigurationError):
        WakeHandler(agent, secret=SECRET, max_runs=0)


async def test_deeply_nested_signed_wake_body_is_400(client: httpx.AsyncClient) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    deep = deep[: 60 * 1024 // 2] + deep[-(60 * 1024 // 2) :]  # under the 64 KiB limit
    for body in [deep, b"not json at all"]:
        r = await client.post("/", content=body, headers=signed_headers(SECRET, body))
        assert r.status_code == 400, body[:10]


async def test_signed_wake_body_with_invalid_session_id_is_400(
    agent: Agent, client: httpx.AsyncClient
) -> None:
    sid = (await agent.session().prompt("where is A-1?").accepted).session_id
    for bad in ["no/slashes", "", 5, "x" * 200]:
        body = json.dumps({"session_id": bad}).encode()
        r = await client.post("/", content=body, headers=signed_headers(SECRET, body))
        assert r.status_code == 400, bad
        assert r.json()["error"] == "invalid_request"
    assert await kinds(agent, sid) == ["prompt"]  # not taken as a cron tick: nothing ran


@tool(needs_approval=True)
def refund(id: str) -> str:
    """Refund an order (waits for a person)."""
    return f"refunded {id}"


async def test_a_session_parked_on_an_approval_is_waiting_not_pending() -> None:
    """Nothing can run until a person decides: 200 ``waiting`` (a 503 would make a
    push queue deliver the message again every few seconds until then). Once
    decided, the next delivery runs the call and answers ``done``."""
    script: list[Reply] = [{"tool": "refund", "input": {"id": "A-1"}}, "Refunded."]
    agent = Agent(ScriptedModel(script), tools=[refund], world=MemoryWorld())
    handler = wake_handler(agent, secret=SECRET)
    sid = (await agent.session().prompt("refund A-1").accepted).session_id
    body = json.dumps({"session_id": sid}).encode()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=handler), base_url="http://test"
    ) as client:
        r = await client.post("/", content=body, headers=signed_headers(SECRET, body))
        assert r.status_code == 200 and r.json()["status"] == "waiting", r.text
        assert "retry-after" not in r.headers
        [waiting] = await agent.session(sid).pending_approvals()
        await agent.session(sid).approve(waiting.execution_id)
        again = json.dumps({"session_id": sid, "after": "the decision"}).encode()
        r = await client.post("/", content=again, headers=signed_headers(SECRET, again))
        assert r.status_code == 200 and r.json()["status"] == "done"
    assert (await kinds(agent, sid))[-1] == "turn.finished"
