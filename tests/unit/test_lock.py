"""requirements/dev.lock is what pyproject.toml asks for (scripts/test refuses it
otherwise), and pins every package exactly."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements" / "dev.lock"


def test_the_lock_matches_pyproject() -> None:
    want = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "deps_hash.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    first = LOCK.read_text().splitlines()[0]
    assert first == f"# fxworld-deps-hash: {want}", (
        "requirements/dev.lock is stale: run 'bash scripts/lock' and commit it"
    )


def test_the_lock_pins_every_package() -> None:
    lines = [ln for ln in LOCK.read_text().splitlines() if ln and not ln.startswith("#")]
    assert len(lines) > 20
    for line in lines:
        assert re.fullmatch(r"[A-Za-z0-9_.\-]+(\[[^\]]+\])?==[^ ;]+( ; .+)?", line), line
    names = {re.split(r"[=\[]", ln)[0].lower() for ln in lines}
    assert {"mypy", "ruff", "hypothesis", "pytest", "check-jsonschema"} <= names
