"""The inspector's routes in process (httpx on the ASGI app, a MemoryWorld): what a
user sees and may do, and what is refused. The browser tests are in
``test_browser_inspector.py``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from fxworld import MemoryWorld, NewEntry
from fxworld.cli import main
from fxworld.engine import log
from fxworld.engine.events import StreamEvent
from fxworld.errors import ConfigurationError
from fxworld.web import create_inspector

JSON = {"Content-Type": "application/json"}


async def _turn(world: MemoryWorld, sid: str, *ending: NewEntry, tokens: int = 5) -> None:
    """A prompt and a turn with one model message; ``ending`` closes it (or not)."""
    seq = await world.append(sid, [log.entry(log.PROMPT, text="hi", key=sid)])
    fence = await world.acquire(sid)
    usage = {"input_tokens": tokens, "output_tokens": 1}
    calls = [
        {"id": e.data["call_id"], "name": e.data["name"], "input": {}, "execution_id": eid}
        for e in ending
        if isinstance(eid := e.data.get("execution_id"), str)
    ]
    entries = [
        log.entry(log.TURN_STARTED, prompt=seq, turn="t"),
        log.entry(log.MESSAGE, call="c", model="m", text="", tool_calls=calls, usage=usage),
        *ending,
    ]
    await world.append(sid, entries, fence=fence)


def _ask(execution_id: str, call_id: str, expires_at: str | None = None) -> NewEntry:
    """The ``approval.requested`` entry of a call of ``refund`` (waits forever
    unless ``expires_at``)."""
    return log.entry(
        log.APPROVAL_REQUESTED,
        execution_id=execution_id,
        call_id=call_id,
        name="refund",
        input={},
        timeout=None if expires_at is None else 1.0,
        expires_at=expires_at,
    )


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://inspect")


@pytest.fixture
async def world() -> AsyncIterator[MemoryWorld]:
    w = MemoryWorld()
    yield w
    await w.close()


def test_it_refuses_to_be_built_without_authorize_or_allow_anyone() -> None:
    with pytest.raises(ConfigurationError, match="authorize"):
        create_inspector(MemoryWorld())


def test_a_non_loopback_start_without_authorize_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["inspect", "--world", "memory://", "--host", "0.0.0.0", "--port", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "--authorize" in err and "0.0.0.0" in err


async def test_each_state_shows_on_the_sessions_page(world: MemoryWorld) -> None:
    await _turn(world, "s-idle", log.entry(log.TURN_FINISHED, prompt=1, turn="t", text=""))
    await _turn(world, "s-failed", log.entry(log.TURN_FAILED, prompt=1, turn="t", error="x"))
    await _turn(world, "s-stopped", log.entry(log.TURN_STOPPED, prompt=1, turn="t", reason=""))
    await _turn(world, "s-running")
    ask = _ask("e1", "c1")
    await _turn(world, "s-waiting", ask, tokens=40)
    app = create_inspector(world, allow_anyone=True)
    async with _client(app) as client:
        page = await client.get("/")
    await app.state.close()
    assert page.status_code == 200
    assert "://" not in page.text  # nothing loaded from elsewhere
    rows = page.text.split('<tr data-sid="')[1:]
    assert rows[0].startswith('s-waiting"')  # newest activity first
    states = {
        r.split('"')[0]: r.split('class="state ')[1].split(">")[1].split("<")[0] for r in rows
    }
    assert states == {
        "s-idle": "idle",
        "s-failed": "failed",
        "s-stopped": "stopped",
        "s-running": "running",
        "s-waiting": "waiting for approval",
    }
    assert "<td class=num>1</td>" in rows[0] and ">41</td>" in rows[0]  # turns, tokens


async def test_a_call_past_its_approval_timeout_is_not_waiting(world: MemoryWorld) -> None:
    await _turn(world, "s", _ask("e1", "c1", expires_at="2020-01-01T00:00:00+00:00"))
    app = create_inspector(world, allow_anyone=True)
    async with _client(app) as client:
        page = await client.get("/sessions/s")
    await app.state.close()
    assert "waits for a decision" in page.text  # the request is in the log...
    assert "Approve" not in page.text and "st-running" in page.text  # ...but not pending


async def test_search_finds_a_text_anywhere_in_ids_and_first_prompts(world: MemoryWorld) -> None:
    for sid in ("t-alpha-1", "alpha-2", "beta-1", "ALPHA", "gamma"):
        text = "ask alpha team" if sid == "gamma" else "hi"
        await world.append(sid, [log.entry(log.PROMPT, text=text, key="k")])
    app = create_inspector(world, allow_anyone=True)
    async with _client(app) as client:
        page = await client.get("/", params={"q": "alpha"})
        bad = await client.get("/", params={"q": "<no>"})
    await app.state.close()
    found = [r.split('"')[0] for r in page.text.split('<tr data-sid="')[1:]]
    assert found == ["gamma", "ALPHA", "alpha-2", "t-alpha-1"]  # newest activity first
    assert bad.status_code == 200 and '<tr data-sid="' not in bad.text
    assert "&lt;no&gt;" in bad.text and "<no>" not in bad.text


async def test_entries_are_escaped_scrubbed_and_pass_through_visible(world: MemoryWorld) -> None:
    card = "4111 1111 1111 1111"
    await world.append("s", [log.entry(log.PROMPT, text=f"<script>x()</script> {card}", key="k")])
    await world.append("s", [log.entry(log.PROMPT, text="a secret one", key="k2")])
    await world.append("s", [log.entry(log.PROMPT, text="sk-abcdefghijklmnop", key="k3")])

    def visible(request: Any, event: StreamEvent) -> StreamEvent | None:
        if "secret" in json.dumps(event.data):
            return None
        return event

    app = create_inspector(world, allow_anyone=True, visible=visible)
    async with _client(app) as client:
        page = await client.get("/sessions/s")
    await app.state.close()
    assert "&lt;script&gt;x()&lt;/script&gt;" in page.text and "<script>x()" not in page.text
    assert card not in page.text and "sk-abcdefghijklmnop" not in page.text
    assert "secret" not in page.text and 'id="e3"' in page.text and 'id="e2"' not in page.text


async def test_a_long_session_is_paged(world: MemoryWorld) -> None:
    await world.append("s", [log.entry(log.PROMPT, text=f"p{n}", key=f"k{n}") for n in range(450)])
    app = create_inspector(world, allow_anyone=True, page_entries=200)
    async with _client(app) as client:
        latest = await client.get("/sessions/s")
        older = await client.get("/sessions/s", params={"before": 251})
        missing = await client.get("/sessions/nobody")
    await app.state.close()
    assert latest.text.count('<li class="entry') == 200
    assert (
        'id="e450"' in latest.text and 'id="e251"' in latest.text and 'id="e250"' not in latest.text
    )
    assert 'href="/sessions/s?before=251&amp;turns=0"' in latest.text
    assert 'id="e250"' in older.text and 'id="e51"' in older.text and 'id="e251"' not in older.text
    assert 'data-live="0"' in older.text and '<b id="entries">450</b>' in older.text
    assert missing.status_code == 404


async def test_actions_are_authorized_and_json_only(world: MemoryWorld) -> None:
    ask = _ask("e1", "c1")
    await _turn(world, "s", ask)
    asked: list[tuple[str, str]] = []

    def authorize(request: Any, session_id: str, action: str) -> bool:
        asked.append((session_id, action))
        return action != "stop"

    app = create_inspector(world, authorize=authorize)
    async with _client(app) as client:
        form = await client.post("/sessions/s/approvals/e1", content=b"approve=1")
        cross = await client.post(
            "/sessions/s/approvals/e1",
            json={"approve": True},
            headers={"Origin": "https://elsewhere.example"},
        )
        stop = await client.post("/sessions/s/stop", json={})
        ok = await client.post(
            "/sessions/s/approvals/e1", json={"approve": True}, headers={"Origin": "http://inspect"}
        )
        again = await client.post("/sessions/s/approvals/e1", json={"approve": False})
    await app.state.close()
    assert (form.status_code, cross.status_code, stop.status_code) == (415, 403, 403)
    assert ok.status_code == 200 and again.status_code == 409
    assert ("s", "approve") in asked and ("s", "stop") in asked
    decided = [e for e in await world.read("s") if e.kind == log.APPROVAL_DECIDED]
    assert len(decided) == 1 and decided[0].data["approved"] is True


async def test_stop_asks_the_running_turn_to_end(world: MemoryWorld) -> None:
    await _turn(world, "s")
    app = create_inspector(world, allow_anyone=True)
    async with _client(app) as client:
        stop = await client.post("/sessions/s/stop", json={"reason": "enough"}, headers=JSON)
    await app.state.close()
    assert stop.status_code == 202 and stop.json()["stopped"] is True
    last = (await world.read("s"))[-1]
    assert (last.kind, last.data["reason"]) == (log.STOP_REQUESTED, "enough")


async def test_wakes_page_shows_due_and_leased(world: MemoryWorld) -> None:
    await world.wake("due-now")
    await world.wake("held")
    await world.wake("later", delay=3600)
    lease = await world.take_wake(lease=60)
    assert lease is not None
    app = create_inspector(world, allow_anyone=True)
    async with _client(app) as client:
        page = await client.get("/wakes")
    await app.state.close()
    rows = page.text.split("<tbody")[1].split("<tr>")[1:]
    assert [r.split(">")[2].split("<")[0] for r in rows] == ["due-now", "held", "later"]
    held = rows[[r.split(">")[2].split("<")[0] for r in rows].index(lease.session_id)]
    assert "not leased" not in held
    assert "<td>later</td>" in rows[2]


async def test_the_loopback_inspector_refuses_other_host_names(tmp_path: Any) -> None:
    from fxworld.commands.inspect import build_app

    class Args:
        authorize = None

    app = build_app(Args(), MemoryWorld())  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        ok = await client.get("/")
        rebound = await client.get("/", headers={"Host": "attacker.example"})
    assert ok.status_code == 200 and rebound.status_code == 400


async def test_a_crash_shows_as_a_takeover_and_a_run_again(world: MemoryWorld) -> None:
    """A fence inside a running turn is a takeover, and an idempotent call started
    again is marked; a fence that takes up a turn parked for approval is neither."""
    call = {"id": "c1", "name": "lookup", "input": {}, "execution_id": "x1"}
    started = {"execution_id": "x1", "call_id": "c1", "name": "lookup", "input": {}}
    await world.append("s", [log.entry(log.PROMPT, text="hi", key="k")])
    first = await world.acquire("s")
    await world.append(
        "s",
        [
            log.entry(log.TURN_STARTED, prompt=1, turn="t"),
            log.entry(log.MESSAGE, call="m", model="m", text="", tool_calls=[call], usage=None),
            log.entry(log.TOOL_STARTED, **started, attempt=1),
        ],
        fence=first,
    )
    second = await world.acquire("s")  # the first worker died mid-tool
    await world.append("s", [log.entry(log.TOOL_STARTED, **started, attempt=2)], fence=second)
    ask = _ask("x2", "c2")
    await world.append("s", [ask], fence=second)
    await world.acquire("s")  # a worker takes the parked turn up after the decision
    app = create_inspector(world, allow_anyone=True)
    async with _client(app) as client:
        page = await client.get("/sessions/s")
    await app.state.close()
    fences = [row for row in page.text.split("<li ") if "k-fence" in row]
    assert ["takeover" in row for row in fences] == [False, True, False]
    assert "took the waiting turn up again" in fences[2]
    assert page.text.count("ran again after a crash (attempt 2)") == 1


def test_a_missing_sqlite_world_is_one_line_and_creates_nothing(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/typo.db"
    assert main(["inspect", "--world", url, "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err
    assert list(tmp_path.iterdir()) == []


def test_the_assets_the_pages_load_ship_in_the_wheel() -> None:
    """Every file the pages link is in the package and matched by package-data (no
    CDN: the inspector must work on a machine without internet)."""
    import fnmatch
    import tomllib
    from pathlib import Path

    from fxworld.web._inspector import ASSETS

    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["fxworld.web"]
    for name in ("inspector.js", "inspector.css"):
        assert (ASSETS / name).is_file()
        assert any(fnmatch.fnmatch(f"assets/{name}", p) for p in patterns), name
