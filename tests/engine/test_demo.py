"""`fxworld demo`, the README's first command, runs to the end and says what happened."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.timeout(120)
def test_demo_runs_and_exits_zero(tmp_path) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.run(
        [sys.executable, "-m", "fxworld.cli", "demo"],
        capture_output=True,
        text=True,
        timeout=110,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "get_order ran AGAIN, same execution_id" in out
    assert "so it did NOT run again" in out
    assert "payment service: 1 refund of A-1001" in out
    assert "no gap and no duplicate" in out
    assert not list(tmp_path.iterdir()), "the demo leaves nothing in the working directory"
