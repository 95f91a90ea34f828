"""FXWORLD_REQUIRE_ALL_BACKENDS=1 turns a fixture's skip (a server that cannot start)
into a failure; mark skips and skips inside a test stay skips; without it, all skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

TESTS = """
import pytest

@pytest.fixture
def server():
    pytest.skip("redis-server could not start")

def test_needs_a_server(server):
    pass

@pytest.mark.skipif(True, reason="not on this platform")
def test_platform():
    pass

def test_capability():
    pytest.skip("the world does not list sessions")
"""


def run(tmp_path: Path, require: str | None) -> tuple[int, str]:
    (tmp_path / "test_it.py").write_text(TESTS)
    env = {k: v for k, v in os.environ.items() if k != "FXWORLD_REQUIRE_ALL_BACKENDS"}
    if require is not None:
        env["FXWORLD_REQUIRE_ALL_BACKENDS"] = require
    plugins = ["-p", "tests.support.require_backends", "-p", "no:cacheprovider", "-p", "no:asyncio"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, "-q", "-rA", "-c", os.devnull, str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout + done.stderr


def test_a_fixture_skip_fails_when_all_backends_are_required(tmp_path: Path) -> None:
    rc, out = run(tmp_path, "1")
    assert rc == 1 and "2 skipped, 1 error" in out, out
    assert "ERROR" in out and "test_needs_a_server" in out and "redis-server could not" in out


def test_without_it_every_skip_stays_a_skip(tmp_path: Path) -> None:
    for value in (None, "0"):
        rc, out = run(tmp_path, value)
        assert rc == 0 and "3 skipped" in out and "error" not in out, out
