"""Issue 34 item 3: ``fxworld serve --allow-anyone`` on loopback could be driven by
any web page that rebinds its own name to 127.0.0.1 (same-origin, so the Origin
and JSON-only rules do not stop it). On a loopback address, serve now refuses a
``Host`` that is not a loopback name (400), with the check ``inspect`` uses."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import httpx
import pytest

from fxworld import Agent, MemoryWorld
from fxworld.cli import build_parser
from fxworld.commands.serve import build_app
from fxworld.testing import ScriptedModel
from tests.support.ports import free_port
from tests.web._server import ServeProcess
from tests.web.test_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, _require_browser

pytestmark = pytest.mark.timeout(120)


async def created(args: list[str], host: str) -> int:
    """The status of ``POST /sessions`` naming ``host``, on the app serve builds."""
    parsed = build_parser().parse_args(["serve", "examples/chat/agent.py:agent", *args])
    app = build_app(parsed, Agent(ScriptedModel(["x"]), world=MemoryWorld()))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as client:
        r = await client.post("/sessions", json={"text": "refund A-1"})
    return r.status_code


async def test_serve_on_loopback_can_be_driven_by_any_web_page() -> None:
    anyone = ["--allow-anyone"]
    for host in ("127.0.0.1:8000", "localhost:8000", "[::1]:8000", "127.0.0.1"):
        assert await created(anyone, host) == 202, host
    for host in ("attacker.example:8000", "rebind.test", "127.0.0.1.attacker.example"):
        assert await created(anyone, host) == 400, host
    for bound in ("localhost", "::1"):  # every loopback address checks
        assert await created([*anyone, "--host", bound], "attacker.example") == 400
    named = [*anyone, "--allowed-host", "app.internal"]  # behind a proxy on this machine
    assert await created(named, "app.internal:8000") == 202
    assert await created(named, "attacker.example") == 400
    # Not on loopback, the Host is the deployment's own business (a gateway's).
    assert await created([*anyone, "--host", "0.0.0.0"], "app.example") == 202


# Chromium's own guard (a public page asking for a loopback address) is turned off:
# other browsers have none, and the server must refuse the page by itself.
NO_LNA = (
    "--disable-features=LocalNetworkAccessChecks,PrivateNetworkAccessSendPreflights,"
    "PrivateNetworkAccessRespectPreflightResults,BlockInsecurePrivateNetworkRequests"
)

ATTACKER_PAGE = """<!doctype html><title>a page elsewhere</title>
<p id="result">pending</p>
<script>
fetch("/sessions", {method: "POST", headers: {"Content-Type": "application/json"},
                    body: JSON.stringify({text: "refund order A-1"})})
  .then(r => r.text().then(t => { document.getElementById("result").textContent =
                                    r.status + " " + t; }))
  .catch(e => { document.getElementById("result").textContent = "error " + e; });
</script>"""


def test_a_rebound_page_cannot_create_a_session_in_chromium(tmp_path: Path) -> None:
    """A page of ``rebind.test``, a name Chromium resolves to 127.0.0.1 (as DNS
    rebinding makes it), is same-origin with the local server: its ``fetch`` reaches
    ``fxworld serve --allow-anyone`` and is refused, and no session is written."""
    sync_api = _require_browser()
    port = free_port()
    db = tmp_path / "world.db"
    server = ServeProcess(
        ["examples/chat/agent.py:agent", "--allow-anyone", "--world", f"sqlite:///{db}"],
        port,
        tmp_path / "serve.log",
    )
    server.start(probe="/sessions/none/stream")
    origin = f"http://rebind.test:{port}"
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM,
                headless=True,
                args=[*CHROMIUM_ARGS, "--host-resolver-rules=MAP rebind.test 127.0.0.1", NO_LNA],
            )
            try:
                page = browser.new_page()
                # The attacker's page, as its own server sent it before the rebinding;
                # every later request of the page goes to 127.0.0.1 through the rule.
                page.route(
                    origin + "/",
                    lambda route: route.fulfill(content_type="text/html", body=ATTACKER_PAGE),
                )
                page.goto(origin + "/")
                page.wait_for_function(
                    "document.getElementById('result').textContent !== 'pending'",
                    timeout=30_000,
                )
                result = page.text_content("#result") or ""
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / "serve-rebinding-refused.png"))
                # The same request from the server's own name still works.
                page.goto(server.base + "/sessions/none/stream?until=turn")
                own = page.evaluate(
                    """() => fetch("/sessions", {method: "POST",
                         headers: {"Content-Type": "application/json"},
                         body: JSON.stringify({text: "hello"})}).then(r => r.status)"""
                )
            finally:
                browser.close()
    finally:
        server.stop()
    assert result.startswith("400 "), result
    assert own == 202
    with sqlite3.connect(db) as conn:
        prompts = [
            json.loads(data)
            for (data,) in conn.execute("SELECT data FROM fx_entries WHERE kind = 'prompt'")
        ]
    assert [d["text"] for d in prompts] == ["hello"]  # the rebound page's never landed
