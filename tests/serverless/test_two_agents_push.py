"""Two agents on one world, run only by pushes (no worker process), through each
queue: SQS (moto and an event source mapping per agent's function), Vercel Queues
(the SDK's dev server and a route per agent) and HTTP (signed POSTs to the wake
routes); each with one queue per agent (a push URL with ``{agent}``) and with one
shared queue. Every session is answered by its own agent, none by the other, none
is left waiting (W19). On a shared SQS queue each agent's function hands the other
agent's messages back (a batch item failure: redelivered, to the other function in
time); on a shared Vercel topic each agent's route is its own consumer group (every
route gets every message and acknowledges the other agent's unrun); on one shared
HTTP URL, one route serves both agents. The drain time (first prompt to last
answer) is printed for the record (``-s``)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fxworld import Agent, open_world
from fxworld.protocol import WakeLister
from fxworld.testing import ScriptedModel
from tests.fleet.two_agents_app import NAMES, answer
from tests.serverless.deployments import LEASE, queue_servers

pytest.importorskip("moto")
pytest.importorskip("vercel.queue")

SESSIONS = 50  # per agent
DELIVERY_LEASE = 30  # s: 100 deliveries per route wait for 8 invocations at a time
SECRET = "two-agents-wake-secret-0123456789"
APP = "tests.fleet.two_agents_app:agent"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with queue_servers(tmp_path_factory.mktemp("queues")) as running:
        yield running


def _env(url: str, tmp: Path, push: str, agent: str | None = None) -> dict[str, str]:
    env = {
        "FXWORLD_URL": url,
        "FXWORLD_AGENT": APP,
        "FXWORLD_PUSH": push,
        "FXWORLD_WAKE_SECRET": SECRET,
        "PYTHONPATH": str(REPO),
        "TEST_DIR": str(tmp),
    }
    return {**env, "TEST_AGENT": agent} if agent else env


def _functions(queue: str, shared: bool, server: Any, url: str, tmp: Path) -> tuple[str, list[Any]]:
    """The push URL and the running functions of one deployment."""
    from fxworld.localqueues.sqs import EventSourceMapping
    from fxworld.localqueues.vercel import Platform, Route

    tag = uuid.uuid4().hex[:8]
    made: list[Any] = []
    if queue == "sqs":
        names = {n: f"q{tag}" if shared else f"q{tag}-{n}" for n in NAMES}
        urls = {n: server.queue(q, visibility=LEASE) for n, q in names.items()}
        push = "sqs+" + (
            urls["support"] if shared else urls["support"][: -len("support")] + "{agent}"
        )
        for n in NAMES:
            made.append(EventSourceMapping(
                server, urls[n], _env(url, tmp, push, n), time_limit=20, margin=1.5,
                lease=LEASE, log=tmp / f"function-{n}.log",
            ))  # fmt: skip
    elif queue == "vercel":
        push = f"vercel-queue://t{tag}" + ("" if shared else "-{agent}")
        for n in NAMES:
            topic = f"t{tag}" if shared else f"t{tag}-{n}"
            made.append(Platform(  # a delivery's lease: long enough to wait in the pool
                server, _env(url, tmp, push, n), time_limit=20, lease=DELIVERY_LEASE,
                log=tmp / f"route-{n}.log", topic=topic, consumer=n,  # fan-out when shared
            ))  # fmt: skip
    else:
        route = Route(
            {**os.environ, **_env(url, tmp, "")}, tmp / "routes.log",
            app="tests.serverless.two_agents_routes:app",
        )  # fmt: skip
        route.ensure()
        push = route.url + ("wake/" if shared else "wake/{agent}/")
        made.append(route)
    return push, made


async def _all_answered(url: str, sessions: dict[str, list[str]], within: float) -> None:
    world = open_world(url)
    deadline = time.monotonic() + within
    try:
        for name, sids in sessions.items():
            for sid in sids:
                while True:
                    entries = await world.read(sid)
                    texts = [e.data.get("text") for e in entries if e.kind == "turn.finished"]
                    if texts:
                        assert texts == [answer(name)], (sid, name, texts)  # its own agent
                        break
                    assert time.monotonic() < deadline, f"{sid} ({name}) never answered"
                    await asyncio.sleep(0.1)
        assert isinstance(world, WakeLister)
        while pending := await world.list_wakes():  # none left waiting (a run that just
            assert time.monotonic() < deadline, pending  # answered finishes its lease)
            await asyncio.sleep(0.1)
    finally:
        await world.close()


@pytest.mark.parametrize("shared", [False, True], ids=["queue-per-agent", "shared-queue"])
@pytest.mark.parametrize("queue", ["sqs", "vercel", "http"])
async def test_two_agents_through_pushes(
    queue: str, shared: bool, servers: dict[str, Any], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    url = f"sqlite:///{tmp_path / 'world.db'}"
    monkeypatch.setenv("FXWORLD_WAKE_SECRET", SECRET)
    push, functions = _functions(queue, shared, servers.get(queue), url, tmp_path)
    for f in functions:
        if hasattr(f, "start"):
            f.start()
    clients = {n: Agent(ScriptedModel([]), name=n, world=url, push=push) for n in NAMES}
    try:
        started = time.monotonic()
        sessions: dict[str, list[str]] = {n: [] for n in NAMES}
        for n, client in clients.items():
            for _ in range(0, SESSIONS, 10):
                accepted = await asyncio.gather(*(client.session().create("Hi") for _ in range(10)))
                sessions[n] += [a.session_id for a in accepted]
        await _all_answered(url, sessions, within=240)
        drain = time.monotonic() - started
        layout = "one shared queue" if shared else "one queue per agent"
        print(f"\n[two agents, pushes] {queue}, {layout}: {2 * SESSIONS} sessions in {drain:.1f} s")
    finally:
        for client in clients.values():
            await client.world.close()
        for f in functions:
            await asyncio.to_thread(f.stop if hasattr(f, "stop") else f.kill)
