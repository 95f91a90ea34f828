"""The sessions page as a console, in process (httpx on the ASGI app, a MemoryWorld
seeded by ``_desk``), and ``fxworld sessions list`` with the same filters: what
needs a person and why, how a mark is kept and cleared (and who cleared it), and the
filters' refusals. The Chromium tests are in ``test_browser_sessions_list.py``."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from fxworld import MemoryWorld, NewEntry, open_world
from fxworld.cli import main
from fxworld.engine import log
from fxworld.engine.summary import summarize
from fxworld.types import Entry
from fxworld.web import create_inspector
from tests.web import _desk


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://inspect")


def _sids(html: str) -> list[str]:
    return re.findall(r'<tr data-sid="([^"]+)"', html)


def _fold(*kinds_and_data: tuple[str, dict[str, Any]]) -> tuple[str, ...]:
    from datetime import UTC, datetime

    entries = [
        Entry("s", n, kind, {"v": 1, **data}, datetime.now(UTC), None)
        for n, (kind, data) in enumerate(kinds_and_data, 1)
    ]
    return summarize("s", entries).attention


P = (log.PROMPT, {"text": "hi"})
START = (log.TURN_STARTED, {"prompt": 1, "turn": "t"})
DONE = (log.TURN_FINISHED, {"prompt": 1, "turn": "t", "text": "ok"})
FAIL = (log.TURN_FAILED, {"prompt": 1, "turn": "t", "error": "x"})


def test_a_mark_stays_until_a_turn_ends_clean_or_a_person_clears_it() -> None:
    assert _fold(P, START, FAIL) == ("failed",)
    assert _fold(P, START, FAIL, P, START) == ("failed",)  # retried: still failed, running
    assert _fold(P, START, FAIL, P, START, DONE) == ()  # a later turn ended clean
    cleared = (log.ATTENTION_CLEARED, {"upto": 3, "actor": "ops:carol"})
    assert _fold(P, START, FAIL, cleared) == ()
    error = (log.TOOL_FINISHED, {"execution_id": "e", "name": "refund", "is_error": True})
    assert _fold(P, START, error, DONE) == ("tool-error",)
    step = (log.STEP_STARTED, {"execution_id": "e", "step": "email", "key": "e:email"})
    assert _fold(P, START, step, DONE) == ("interrupted",)  # a step never finished
    done = (log.STEP_FINISHED, {"execution_id": "e", "step": "email", "result": 1})
    assert _fold(P, START, step, done, DONE) == ()
    cut = (log.TOOL_INTERRUPTED, {"execution_id": "e", "name": "refund", "message": "m"})
    stopped = (log.TURN_STOPPED, {"prompt": 1, "turn": "t", "text": "", "reason": None})
    assert _fold(P, START, cut, stopped) == ("interrupted", "stopped")


async def test_the_page_counts_filters_and_clears_with_the_actor() -> None:
    world = MemoryWorld()
    await _desk.seed(world, stuck=False)
    asked: list[str] = []

    def authorize(request: Any, sid: str, action: str) -> str:
        asked.append(action)
        return "ops:carol"

    app = create_inspector(world, authorize=authorize)
    async with _client(app) as c:
        page = (await c.get("/")).text
        needing = [sid for sid in _sids(page) if sid not in _desk.CLEAN]
        assert _sids(page)[: len(needing)] == needing  # what needs a person first
        assert set(needing) == set(_desk.NEEDS)
        assert re.search(r'data-attention="failed"[^>]*>failed <b>2</b>', page)
        assert _sids((await c.get("/?attention=any&context=tenant%3Dglobex")).text) == [
            "t-globex-0002",
            "t-globex-0001",
        ]
        assert _sids((await c.get("/?agent=billing")).text) == ["t-acme-0005", "child-e-credit"]
        assert _sids((await c.get("/?q=INVOICE")).text) == ["t-acme-0003"]
        for bad in ("attention=later", "active=soon", "context=tenant", "state=asleep"):
            answer = await c.get(f"/?{bad}")
            assert answer.status_code == 400, bad
        cleared = await c.post(
            "/sessions/t-globex-0001/clear", json={"upto": 4, "note": "customer called"}
        )
        again = await c.post("/sessions/t-globex-0001/clear", json={"upto": 4})
        nothing = await c.post("/sessions/t-acme-0001/clear", json={})
        bad_upto = await c.post("/sessions/t-globex-0002/clear", json={"upto": "4"})
        after = (await c.get("/?attention=failed")).text
    await app.state.close()
    assert cleared.status_code == 200 and again.json() == cleared.json()  # written once
    assert (nothing.status_code, bad_upto.status_code) == (409, 400)
    assert "clear" in asked
    entries = await world.read("t-globex-0001", 0)
    marks = [e.data for e in entries if e.kind == log.ATTENTION_CLEARED]
    assert marks == [{"v": 1, "upto": 4, "actor": "ops:carol", "note": "customer called"}]
    assert _sids(after) == ["t-acme-0006"]


async def test_with_visible_a_search_looks_in_ids_only() -> None:
    world = MemoryWorld()
    await world.append("a-1", [log.entry(log.PROMPT, text="secret plan", key="k")])
    app = create_inspector(world, allow_anyone=True, visible=lambda request, event: event)
    async with _client(app) as c:
        by_prompt = (await c.get("/?q=secret")).text
        by_id = (await c.get("/?q=a-")).text
    await app.state.close()
    assert (_sids(by_prompt), _sids(by_id)) == ([], ["a-1"])


def test_sessions_list_takes_the_same_filters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"

    async def seed() -> None:
        world = open_world(url)
        await world.setup()
        await _desk.seed(world, stuck=False)
        await world.append("t-acme-0001", [NewEntry("note", {"v": 1})])  # the newest
        await world.close()

    asyncio.run(seed())

    def listed(*args: str) -> list[list[str]]:
        assert main(["sessions", "list", "--world", url, *args]) == 0
        return [re.split(r"\s{2,}", x) for x in capsys.readouterr().out.splitlines()]

    rows = listed()
    assert rows[0][:4] == ["t-acme-0001", "idle", "-", "support"]
    assert [r[0] for r in listed("--attention", "waiting")] == [
        "child-e-credit",
        "t-acme-0005",  # its child waits
        "t-acme-0002",
    ]
    assert [r[0] for r in listed("--agent", "billing")] == ["child-e-credit"]
    globex = listed("--context", "tenant=globex", "--attention", "any")
    assert {(r[0], r[2]) for r in globex} == {
        ("t-globex-0001", "failed"),
        ("t-globex-0002", "tool-error"),
    }
    assert [r[0] for r in listed("--search", "PARCEL", "--active", "1h")] == ["t-acme-0001"]
    assert [r[0] for r in listed("--state", "stopped")] == ["t-acme-0004"]
    assert main(["sessions", "list", "--world", url, "--attention", "later"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "attention is one of any, waiting" in err


async def test_a_wake_no_worker_takes_makes_its_session_stuck_and_its_parent_shows_it() -> None:
    world = MemoryWorld()
    await _desk.seed(world, stuck=False)
    await world.wake("child-e-credit")  # due now; no worker runs
    app = create_inspector(world, allow_anyone=True, stuck_after=0.05, refresh=0.05)
    async with _client(app) as c:
        for _ in range(400):  # until a pass has read the wake and it waited long enough
            stuck = _sids((await c.get("/?attention=stuck")).text)
            if stuck:
                break
            await asyncio.sleep(0.05)
    await app.state.close()
    assert stuck == ["t-acme-0005", "child-e-credit"]  # the parent, its child under it
