"""A replayed wake request holds no power beyond "look for due turns": a signed
request replayed within the window to another instance (another app over the same
world), or after a restart (a new app object), runs no turn that has already run
and no effect twice; it only runs what is due anyway, each turn exactly once."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from fxworld import Agent, tool
from fxworld.testing import Reply, ScriptedModel
from fxworld.web import WakeHandler, signed_headers
from tests.web.test_wake import SECRET

pytestmark = pytest.mark.timeout(60)

REFUNDS: list[str] = []


@tool
async def refund(order: str) -> str:
    """Refunds an order (an effect: it must happen once per turn)."""
    REFUNDS.append(order)
    return f"order {order}: refunded"


def instance(world: str) -> Agent:
    """One function instance: its own agent and model, the shared world."""
    one_turn: list[Reply] = [{"tool": "refund", "input": {"order": "A-1"}}, "Refunded."]
    script = one_turn * 2  # the replies of two turns
    return Agent(ScriptedModel(script), tools=[refund], world=world)


async def post(agent: Agent, body: bytes, headers: dict[str, str]) -> httpx.Response:
    app = WakeHandler(agent, secret=SECRET)  # a new app object: nothing remembered
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        return await c.post("/", content=body, headers=headers)


@pytest.fixture
def world(tmp_path: Path) -> str:
    REFUNDS.clear()
    return f"sqlite:///{tmp_path / 'world.db'}"


async def test_a_replay_to_another_instance_or_after_a_restart_runs_nothing_again(
    world: str,
) -> None:
    first = instance(world)
    sid = (await first.session().prompt("refund A-1").accepted).session_id
    body = json.dumps({"session_id": sid}).encode()
    headers = signed_headers(SECRET, body)
    r = await post(first, body, headers)
    assert (r.status_code, r.json()["status"]) == (200, "done")
    assert REFUNDS == ["A-1"]
    log = [(e.cursor, e.kind) for e in await first.session(sid).read(None)]
    for replayed_at in (instance(world), instance(world)):  # another instance; a restart
        r = await post(replayed_at, body, headers)  # the same signed request, in the window
        assert (r.status_code, r.json()["status"]) == (200, "done")
        assert [(e.cursor, e.kind) for e in await replayed_at.session(sid).read(None)] == log
    assert REFUNDS == ["A-1"]


async def test_a_replay_runs_only_what_is_due_anyway_and_each_turn_once(world: str) -> None:
    first = instance(world)
    sid = (await first.session().prompt("refund A-1").accepted).session_id
    body = json.dumps({"session_id": sid}).encode()
    headers = signed_headers(SECRET, body)
    assert (await post(first, body, headers)).status_code == 200
    await first.session(sid).prompt("and again").accepted  # a new turn is due
    r = await post(instance(world), body, headers)  # the old request replayed elsewhere
    assert (r.status_code, r.json()["status"]) == (200, "done")  # ran the due turn
    # The new turn's own request (or a cron tick) then finds it done: nothing twice.
    own = json.dumps({"session_id": sid, "n": 2}).encode()
    r = await post(instance(world), own, signed_headers(SECRET, own))
    assert (r.status_code, r.json()["status"]) == (200, "done")
    kinds = [e.kind for e in await first.session(sid).read(None)]
    assert kinds.count("turn.finished") == 2 and REFUNDS == ["A-1", "A-1"]
