"""``fxworld serve`` as a user runs it: a real process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from fxworld.web import signed_headers
from tests.support.ports import free_port
from tests.web._server import REPO, ServeProcess

pytestmark = pytest.mark.timeout(120)

SECRET = "cli-test-secret-0123456789"


def test_refuses_to_start_without_authorize_or_allow_anyone(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "fxworld.cli",
            "serve",
            "examples/chat/agent.py:agent",
            "--world",
            f"sqlite:///{tmp_path / 'w.db'}",
            "--port",
            str(free_port()),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "--allow-anyone" in r.stderr and "--authorize" in r.stderr
    assert "Traceback" not in r.stderr


def test_web_only_process_and_the_wake_path(tmp_path: Path) -> None:
    """``--workers 0`` saves prompts but runs no turn; a signed request to the wake
    handler mounted with ``--wake-path`` runs it."""
    server = ServeProcess(
        [
            "examples/chat/agent.py:agent",
            "--allow-anyone",
            "--workers",
            "0",
            "--wake-path",
            "/api/wake",
            "--world",
            f"sqlite:///{tmp_path / 'w.db'}",
        ],
        free_port(),
        tmp_path / "serve.log",
        env={
            "FXWORLD_WAKE_SECRET": SECRET,
            "FXWORLD_CHAT_DELAY": "0",
            "FXWORLD_CHAT_TOOL_DELAY": "0",
        },
    )
    server.start(probe="/sessions/s-probe/stream")
    try:
        with httpx.Client(base_url=server.base, timeout=30) as client:
            r = client.post("/sessions", json={"text": "where is A-1?"})
            assert r.status_code == 202
            sid = r.json()["session_id"]
            time.sleep(1.0)
            # Nothing runs the turn: the stream holds only the prompt and stays open.
            seen: list[str] = []
            with (
                pytest.raises(httpx.ReadTimeout),
                client.stream(
                    "GET",
                    f"/sessions/{sid}/stream?until=turn",
                    timeout=httpx.Timeout(30, read=4.0),
                ) as s,
            ):
                seen.extend(line[7:] for line in s.iter_lines() if line.startswith("event: "))
            assert seen == ["prompt"]

            body = json.dumps({"session_id": sid}).encode()
            assert client.post("/api/wake", content=body).status_code == 401
            r = client.post("/api/wake", content=body, headers=signed_headers(SECRET, body))
            assert r.status_code == 200, r.text
            with client.stream("GET", f"/sessions/{sid}/stream?until=turn") as s:
                events = [line[7:] for line in s.iter_lines() if line.startswith("event: ")]
            assert events[0] == "prompt" and events[-1] == "turn.finished"
            assert "tool.finished" in events
    except BaseException:
        print(server.output())
        raise
    finally:
        server.stop()
