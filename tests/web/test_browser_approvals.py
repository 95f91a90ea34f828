"""The chat example's approval card and Stop button in a real browser.

Headless Chromium (Debian's ``/usr/bin/chromium``, driven by Playwright) on
``examples/chat`` served by a real ``fxworld serve`` process on a SQLite world:

- a refund waits for approval; the server is SIGKILLed and started again while
  the turn waits (no process holds it); the page reconnects and Approve, pressed
  now, lets the new process run the refund and finish the turn;
- Stop, pressed while the answer streams, ends the turn; after a reload (the
  page's EventSource reads the stream again) the stopped answer shows once,
  marked as stopped.

Every event of the log is on the page exactly once, in order. Screenshots are
saved in ``artifacts/web/`` (``approval-after-restart.png``,
``stop-after-reload.png``; ``*-failure.png`` when a run fails).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.ports import free_port
from tests.web._server import ServeProcess
from tests.web.test_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, _require_browser

pytestmark = pytest.mark.timeout(180)


def _serve(tmp_path: Path, delay: str) -> ServeProcess:
    return ServeProcess(
        [
            "examples/chat/agent.py:agent",
            "--static",
            "examples/chat/static",
            "--allow-anyone",
            "--world",
            f"sqlite:///{tmp_path / 'world.db'}",
            "--lease",
            "15",
        ],
        free_port(),
        tmp_path / "serve.log",
        env={"FXWORLD_CHAT_DELAY": delay, "FXWORLD_CHAT_TOOL_DELAY": "0.2"},
    )


@contextmanager
def _page(tmp_path: Path, server: ServeProcess, name: str) -> Iterator[Any]:
    """A page on a fresh browser profile; a screenshot ``<name>-failure.png`` and
    the page's events are kept when the block fails."""
    sync_api = _require_browser()
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 900, "height": 1000},
        )
        page = context.new_page()
        try:
            yield page
        except BaseException:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / f"{name}-failure.png"), full_page=True)
            print("page status:", page.text_content("#status"))
            print("page events:", _shown(page))
            print(server.output())
            raise
        finally:
            context.close()
            shutil.rmtree(tmp_path / "profile", ignore_errors=True)


def _shown(page: Any) -> list[tuple[str, str]]:
    return [
        (c, k)
        for c, k in page.eval_on_selector_all(
            "[data-cursor]", "els => els.map(e => [e.dataset.cursor, e.dataset.kind])"
        )
    ]


def _logged(tmp_path: Path, session_id: str) -> list[tuple[str, str]]:
    """Every event of the session's log, with the cursors the stream gives them."""
    from fxworld import SqliteWorld
    from fxworld.engine import encode_cursor

    async def read() -> list[tuple[str, str]]:
        world = SqliteWorld(tmp_path / "world.db")
        try:
            entries = await world.read(session_id, 0, limit=10_000)
        finally:
            await world.close()
        return [(encode_cursor(session_id, e.seq), e.kind) for e in entries]

    return asyncio.run(read())


def _session_id(page: Any) -> str:
    return str(page.evaluate("new URLSearchParams(location.hash.slice(1)).get('s')"))


def test_approve_after_the_server_was_killed_while_the_turn_waited(tmp_path: Path) -> None:
    server = _serve(tmp_path, "0.01")
    server.start()
    try:
        with _page(tmp_path, server, "approval") as page:
            page.goto(server.base + "/")
            page.fill("#text", "Where is my order A-1?")
            page.click("#send")
            page.wait_for_selector('[data-kind="turn.finished"]', timeout=60_000)
            page.fill("#text", "Please refund it.")
            page.click("#send")
            page.wait_for_selector(".approval button.approve", timeout=60_000)
            assert "refund_order" in page.text_content(".approval")

            server.kill()  # the turn waits for a person: nothing holds it
            page.wait_for_function(
                "document.getElementById('status').textContent.startsWith('reconnecting')",
                timeout=30_000,
            )
            server.start()
            page.wait_for_function(
                "document.getElementById('status').textContent === 'live'", timeout=30_000
            )
            page.click(".approval button.approve")
            page.wait_for_selector('[data-kind="approval.decided"]', timeout=30_000)
            page.wait_for_function(
                "document.querySelectorAll('[data-kind=\"turn.finished\"]').length === 2",
                timeout=60_000,
            )
            time.sleep(0.5)  # a duplicate arriving late would show now
            shown = _shown(page)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "approval-after-restart.png"), full_page=True)
            sid = _session_id(page)
            assert page.is_disabled("#stop")  # no turn runs any more
        logged = _logged(tmp_path, sid)
        assert shown == logged, json.dumps({"page": shown, "log": logged}, indent=1)
        kinds = [k for _, k in logged]
        assert kinds.count("approval.requested") == 1 and kinds.count("approval.decided") == 1
        refund_started = [i for i, k in enumerate(kinds) if k == "tool.started"][-1]
        assert kinds.index("approval.decided") < refund_started
        assert "tool.interrupted" not in kinds and kinds[-1] == "turn.finished"
    finally:
        server.stop()


def test_stop_mid_stream_then_reload_shows_the_stopped_answer_once(tmp_path: Path) -> None:
    server = _serve(tmp_path, "0.25")
    server.start()
    try:
        with _page(tmp_path, server, "stop") as page:
            page.goto(server.base + "/")
            page.fill("#text", "Where is my order A-1?")
            page.click("#send")
            page.wait_for_function(
                "document.querySelectorAll('[data-kind=\"text\"]').length >= 3", timeout=60_000
            )
            page.click("#stop")
            page.wait_for_selector('[data-kind="turn.stopped"]', timeout=30_000)
            before = _shown(page)
            stopped_text = page.text_content(".assistant.stopped .bubble")

            page.reload()  # the EventSource reads the session's stream again
            page.wait_for_selector('[data-kind="turn.stopped"]', timeout=30_000)
            time.sleep(0.5)
            shown = _shown(page)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "stop-after-reload.png"), full_page=True)
            bubbles = page.eval_on_selector_all(
                ".assistant .bubble", "els => els.map(e => e.textContent)"
            )
            stopped = page.eval_on_selector_all(
                ".assistant.stopped .bubble", "els => els.map(e => e.textContent)"
            )
            sid = _session_id(page)
            assert page.is_disabled("#stop")
        assert shown == before  # the same events, once each, after the reload
        assert stopped == [stopped_text] and bubbles.count(stopped_text) == 1, (bubbles, stopped)
        logged = _logged(tmp_path, sid)
        assert shown == logged, json.dumps({"page": shown, "log": logged}, indent=1)
        kinds = [k for _, k in logged]
        assert kinds[-1] == "turn.stopped", kinds
        assert "message" not in kinds[kinds.index("tool.finished") :], kinds  # cut mid-stream
    finally:
        server.stop()
