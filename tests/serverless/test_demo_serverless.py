"""`fxworld demo --serverless vercel|sqs` runs the whole deployment and exits 0."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest


@pytest.mark.parametrize("queue", ["vercel", "sqs"])
def test_the_serverless_demo_ends_every_turn_once_and_exits_0(queue: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fxworld.cli", "demo", "--serverless", queue],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("ok: 1 turn, ended 1 time(s)")
    crashed = re.search(r"\((\d+) crashed", last)
    assert crashed is not None and int(crashed[1]) >= 1  # the SIGKILL mid refund
    assert "refund_order ran 1 time(s)" in last
    assert "turn yielded (deadline)" in done.stdout
