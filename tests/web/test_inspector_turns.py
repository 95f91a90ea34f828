"""The inspector's routes in process (httpx on the ASGI app, a MemoryWorld): what
``visible`` hides stays hidden everywhere, probes leave nothing behind, and the
Retry of a failed turn. The pages themselves, in Chromium: ``test_browser_turns.py``."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import httpx
import pytest

from fxworld import MemoryWorld, open_world
from fxworld.engine import log
from fxworld.engine.events import StreamEvent
from fxworld.protocol import World
from fxworld.web import create_inspector
from tests.web import _turns

JSON = {"Content-Type": "application/json"}


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://inspect")


def _hide_refunds(request: Any, event: StreamEvent) -> StreamEvent | None:
    """Hides every entry about the ``refund_order`` call (its model message, its
    approval request)."""
    return None if "refund_order" in json.dumps(event.data) else event


async def test_the_waiting_box_respects_visible() -> None:
    """#34.10: a call waits for a decision, and ``visible`` hides the entries about
    it: the page shows neither its tool, nor its execution id,
    nor Approve/Deny."""
    world = MemoryWorld()
    await _turns.waiting_turn(world, "s")
    hidden = create_inspector(world, allow_anyone=True, visible=_hide_refunds)
    shown = create_inspector(world, allow_anyone=True)
    async with _client(hidden) as client:
        page = await client.get("/sessions/s")
    async with _client(shown) as client:
        everything = await client.get("/sessions/s")
    await hidden.state.close()
    await shown.state.close()
    assert "waiting for approval" in page.text  # the state is the session's, not the call's
    for secret in ("refund_order", "xs3", "Approve", "Deny"):
        assert secret not in page.text, secret
        assert secret in everything.text, secret  # (the same page without visible shows it)


async def test_the_first_prompt_on_the_sessions_page_respects_visible() -> None:
    world = MemoryWorld()
    await _turns.finished_turn(world, "s")

    def hide_prompts(request: Any, event: StreamEvent) -> StreamEvent | None:
        return None if event.kind == log.PROMPT else event

    app = create_inspector(world, allow_anyone=True, visible=hide_prompts)
    async with _client(app) as client:
        page = await client.get("/")
    await app.state.close()
    assert 'data-sid="s"' in page.text and "A-1041" not in page.text


class NoListWorld(MemoryWorld):
    """A world that cannot list its sessions, as S3 is to the inspector."""

    list_sessions = None  # type: ignore[assignment]


@pytest.mark.parametrize("backend", ["nolist", "s3"])
async def test_probing_missing_sessions_on_a_world_that_cannot_list_leaves_nothing(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """#34.11: on S3, each ``GET /sessions/<missing>/follow`` left a summary in the
    index for good (3,000 requests: 3,000 summaries). Now none, on a world that
    cannot list its sessions and on S3."""
    world: World = NoListWorld()
    probes = 3000 if backend == "nolist" else 300  # (an S3 read is a few ms)
    if backend == "s3":
        world = open_world(request.getfixturevalue("s3_url"))
    await world.append("real", [log.entry(log.PROMPT, text="hi", key="k")])
    app = create_inspector(world, allow_anyone=True)
    app.state.end_streams()  # each stream ends at once: only what the route keeps stays
    index = app.state.index  # (its passes, which drop what a world no longer lists, never start)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    async with _client(app) as client:
        for n in range(probes):
            probe = await client.get(f"/sessions/missing-{n}/follow")
            assert probe.status_code == 200
        page = await client.get("/sessions/real")
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    kept = len(index.summaries)
    print(f"{backend}: after {probes} probes, {kept} summaries, {grown >> 10} KiB grown")
    assert page.status_code == 200
    assert list(index.summaries) == ["real"]
    await app.state.close()
    await world.close()


async def test_the_index_of_a_world_that_cannot_list_is_bounded() -> None:
    from fxworld.web._summary import UNLISTED_KEPT

    world = NoListWorld()
    for n in range(UNLISTED_KEPT + 5):
        await world.append(f"s{n}", [log.entry(log.PROMPT, text="hi", key="k")])
    app = create_inspector(world, allow_anyone=True)
    async with _client(app) as client:
        for n in range(UNLISTED_KEPT + 5):
            await client.get(f"/sessions/s{n}")
        await client.get("/sessions/s0")  # viewed again: kept, the oldest viewed dropped
    await app.state.close()
    kept = list(app.state.index.summaries)
    assert len(kept) == UNLISTED_KEPT and kept[-1] == "s0" and "s1" not in kept


async def test_retry_sends_the_failed_turns_prompt_again_once() -> None:
    world = MemoryWorld()
    await _turns.finished_turn(world, "s")
    await _turns.failed_turn(world, "s")
    asked: list[tuple[str, str]] = []

    def authorize(request: Any, session_id: str, action: str) -> bool:
        asked.append((session_id, action))
        return request.headers.get("authorization") == "ops"

    app = create_inspector(world, authorize=authorize)
    ops = {"authorization": "ops"}
    async with _client(app) as client:
        refused = await client.post("/sessions/s/retry", json={})
        form = await client.post("/sessions/s/retry", content=b"x=1", headers=ops)
        first = await client.post("/sessions/s/retry", json={}, headers=ops)
        again = await client.post("/sessions/s/retry", json={}, headers=ops)
    await app.state.close()
    assert (refused.status_code, form.status_code) == (403, 415)
    assert ("s", "retry") in asked
    assert first.status_code == again.status_code == 202
    assert first.json() == again.json()  # a double click retries once
    entries = await world.read("s")
    prompts = [e for e in entries if e.kind == log.PROMPT]
    assert [p.data["text"] for p in prompts][-2:] == ["Send me the invoice for A-1041."] * 2
    retry = prompts[-1]
    failed = next(e for e in entries if e.kind == log.TURN_FAILED)
    assert retry.seq == first.json()["prompt"] == entries[-1].seq
    assert retry.data["key"] == f"retry-{failed.seq}" and first.json()["retried"] == failed.seq
    assert await world.take_wake(lease=5) is not None  # a worker is asked to answer it


async def test_retry_refuses_a_session_whose_latest_turn_did_not_fail() -> None:
    world = MemoryWorld()
    await _turns.finished_turn(world, "done")
    await _turns.failed_turn(world, "asked")
    await world.append("asked", [log.entry(log.PROMPT, text="something else", key="k2")])
    app = create_inspector(world, allow_anyone=True)
    async with _client(app) as client:
        done = await client.post("/sessions/done/retry", json={})
        asked = await client.post("/sessions/asked/retry", json={})
    await app.state.close()
    assert (done.status_code, done.json()["error"]) == (409, "not_failed")
    assert (asked.status_code, asked.json()["error"]) == (409, "prompt_waiting")
    assert [e.kind for e in await world.read("done")][-1] == log.TURN_FINISHED
    assert (await world.read("asked"))[-1].data["text"] == "something else"


async def test_a_state_filter_that_is_not_a_state_is_400() -> None:
    world = MemoryWorld()
    await _turns.finished_turn(world, "s")
    app = create_inspector(world, allow_anyone=True)
    async with _client(app) as client:
        bad = await client.get("/", params={"state": "<b>"})
        idle = await client.get("/", params={"state": "idle"})
        failed = await client.get("/", params={"state": "failed"})
    await app.state.close()
    assert bad.status_code == 400 and "<b>" not in bad.text and "idle" in bad.json()["message"]
    assert 'data-sid="s"' in idle.text and 'data-sid="s"' not in failed.text
    assert "idle (1)" in idle.text and "failed (0)" in idle.text


async def test_a_page_that_starts_inside_a_turn_shows_that_turns_header() -> None:
    world = MemoryWorld()
    await _turns.finished_turn(world, "s")
    notes = [log.entry(log.TEXT, call="m", text=f"{n} ") for n in range(300)]
    await _turns.turn(world, "s", "Write a long answer.", *notes)
    app = create_inspector(world, allow_anyone=True, page_entries=200)
    async with _client(app) as client:
        page = await client.get("/sessions/s")
    await app.state.close()
    timeline = page.text.split('id="timeline"')[1]
    assert timeline.split(">", 1)[1].startswith('<li class="turn" id="t11"')  # no loose card
    assert timeline.count('<li class="turn"') == 1 and "Write a long answer." in timeline
    assert "running" in timeline.split("</summary>")[0]
