"""The chat example in a real browser, across a server crash in the middle of a turn.

Headless Chromium (Debian's ``/usr/bin/chromium``, driven by Playwright; no browser
is downloaded) opens ``examples/chat/static`` served by a real ``fxworld serve`` process on
a SQLite world, and sends a prompt. While the reply's text is streaming, the server
is SIGKILLed, then started again on the same port. The page's ``EventSource``
reconnects by itself with ``Last-Event-ID``, the new process's worker continues the
turn from the log, and the page must end with every event of the session's log
exactly once, in order. A screenshot of the final page is saved in
``artifacts/web/``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.ports import free_port
from tests.web._server import REPO, ServeProcess

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = REPO / "artifacts" / "web"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]

pytestmark = pytest.mark.timeout(180)


def _require_browser() -> Any:
    """Playwright's sync API, or a skip (a failure under CI, where both must exist)."""
    missing = []
    sync_api: Any = None
    try:
        from playwright import sync_api
    except ImportError:
        missing.append("the playwright package (pip install -e '.[dev]')")
    if not os.access(CHROMIUM, os.X_OK):
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    if missing:
        message = "browser test needs " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return sync_api


def _server_events(base: str, session_id: str) -> list[tuple[str, str]]:
    """Every event of the session's (single) turn, read from the server's stream."""
    out: list[tuple[str, str]] = []
    with httpx.stream("GET", f"{base}/sessions/{session_id}/stream?until=turn", timeout=30.0) as r:
        assert r.status_code == 200
        cursor = ""
        for line in r.iter_lines():
            if line.startswith("id: "):
                cursor = line[4:]
            elif line.startswith("event: "):
                out.append((cursor, line[7:]))
    return out


def test_page_survives_server_kill_mid_turn(tmp_path: Path) -> None:
    sync_api = _require_browser()
    port = free_port()
    world = f"sqlite:///{tmp_path / 'world.db'}"
    server = ServeProcess(
        [
            "examples/chat/agent.py:agent",
            "--static",
            "examples/chat/static",
            "--allow-anyone",
            "--world",
            world,
            "--lease",
            "2",
        ],
        port,
        tmp_path / "serve.log",
        # Slow enough that the kill lands while the reply's text streams.
        env={"FXWORLD_CHAT_DELAY": "0.15", "FXWORLD_CHAT_TOOL_DELAY": "0.3"},
    )
    stream_requests: list[Any] = []
    t0 = time.monotonic()

    def step(what: str) -> None:  # shown with the output of a failed run
        print(f"{time.monotonic() - t0:7.2f}s {what}", flush=True)

    server.start()
    step("server up")
    try:
        with sync_api.sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                str(tmp_path / "profile"),
                executable_path=CHROMIUM,
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": 900, "height": 1000},
            )
            try:
                page = context.new_page()
                page.on(
                    "request",
                    lambda req: stream_requests.append(req) if "/stream" in req.url else None,
                )
                page.goto(server.base + "/")
                page.fill("#text", "Where is my order A-1?")
                page.click("#send")
                step("prompt sent")

                # Mid-turn: the tool ran and part of the reply's text is on the page.
                page.wait_for_function(
                    "document.querySelectorAll('[data-kind=\"text\"]').length >= 2",
                    timeout=60_000,
                )
                step("text is streaming: SIGKILL")
                server.kill()
                page.wait_for_function(
                    "document.getElementById('status').textContent.startsWith('reconnecting')",
                    timeout=30_000,
                )
                before = page.eval_on_selector_all(
                    "[data-cursor]", "els => els.map(e => e.dataset.cursor)"
                )
                requests_before_restart = len(stream_requests)
                step("page is reconnecting: restart")
                # The killed server's 2 s lease sets the wait; the new one holds a
                # long lease, so a stall cannot make it take the session again.
                server.args[server.args.index("--lease") + 1] = "15"
                server.start()
                step("server up again")

                page.wait_for_selector('[data-kind="turn.finished"]', timeout=90_000)
                step("turn finished on the page")
                time.sleep(0.5)  # anything arriving late (a duplicate) would show now
                shown: list[tuple[str, str]] = [
                    (c, k)
                    for c, k in page.eval_on_selector_all(
                        "[data-cursor]", "els => els.map(e => [e.dataset.cursor, e.dataset.kind])"
                    )
                ]
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / "chat-after-restart.png"), full_page=True)
                session_id = page.evaluate("new URLSearchParams(location.hash.slice(1)).get('s')")
                # The headers the browser really sent (Last-Event-ID is added by the
                # network stack, so only all_headers() shows it).
                sent = [
                    {"url": r.url, **r.all_headers()}
                    for r in stream_requests[requests_before_restart:]
                ]
            except BaseException:
                # What the page showed when it went wrong, for the report.
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / "chat-failure.png"), full_page=True)
                print("page status:", page.text_content("#status"))
                print(
                    "page events:",
                    page.eval_on_selector_all(
                        "[data-cursor]", "els => els.map(e => e.dataset.kind)"
                    ),
                )
                print("stream requests:", [r.url for r in stream_requests])
                raise
            finally:
                context.close()

        logged = _server_events(server.base, session_id)
        # Every event of the log is on the page exactly once, in order.
        assert shown == logged, json.dumps({"page": shown, "log": logged}, indent=1)
        kinds = [k for _, k in logged]
        # The crash really was mid-turn: a second worker took over and the cut-off
        # text was marked discarded before the reply was streamed again.
        assert kinds.count("fence") == 2
        assert "text.discarded" in kinds
        assert kinds.index("text.discarded") > kinds.index("fence", kinds.index("fence") + 1)
        assert kinds[-1] == "turn.finished"
        # EventSource reconnected by itself, resuming after the last event it had.
        resumed = [r for r in sent if "last-event-id" in r]
        assert resumed, sent
        assert all("cursor=" not in r["url"] for r in sent), sent  # not the page's fallback
        assert resumed[-1]["last-event-id"] == before[-1]
    except BaseException:
        print(server.output())
        raise
    finally:
        server.stop()
        if os.environ.get("FXWORLD_KEEP_PROFILE") is None:
            shutil.rmtree(tmp_path / "profile", ignore_errors=True)
