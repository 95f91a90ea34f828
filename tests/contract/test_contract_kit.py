"""docs/contract.md section 5: the kit, run as a backend author would (CLI and pytest plugin).

Kept fast: only the kit's directed tier (``--tiers directed``); the full kit runs in
tests/conformance.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FACTORIES = """
from fxworld import MemoryWorld, open_world

def make():
    return MemoryWorld()

async def amake():
    return open_world("memory://")

class NoFence(MemoryWorld):
    async def append(self, session_id, entries, *, fence=None, expect=None, key=None, wake=None):
        return await super().append(session_id, entries, expect=expect, key=key, wake=wake)

def broken():
    return NoFence()
"""


@pytest.fixture
def author_dir(tmp_path: Path) -> Path:
    (tmp_path / "my_backend_factories.py").write_text(textwrap.dedent(FACTORIES))
    return tmp_path


def fxworld_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The console script, as a backend author types it (its sys.path[0] is not the cwd).
    exe = Path(sys.executable).with_name("fxworld")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "fxworld.cli"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [*cmd, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("factory", ["my_backend_factories:make", "my_backend_factories:amake"])
def test_cli_factory_from_current_directory(author_dir: Path, factory: str) -> None:
    r = fxworld_cli(author_dir, "conformance", "--world", factory, "--tiers", "directed", "-q")
    assert r.returncode == 0, r.stdout + r.stderr
    for w in ("W1 ", "W2 ", "W10", "W17"):
        assert w in r.stdout
    assert "FAIL" not in r.stdout


def test_cli_broken_world_fails(author_dir: Path) -> None:
    r = fxworld_cli(
        author_dir, "conformance", "--world", "my_backend_factories:broken", "--tiers", "directed"
    )
    assert r.returncode != 0
    w2 = [line for line in r.stdout.splitlines() if line.startswith("W2 ")]
    assert w2 and "FAIL" in w2[0], r.stdout + r.stderr


def test_cli_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/kit.db"  # (memory is run through the factories above)
    r = fxworld_cli(tmp_path, "conformance", "--world", url, "--tiers", "directed")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "W4 " in r.stdout and "FAIL" not in r.stdout
    for line in r.stdout.splitlines():  # whatever the kit skips, it says why
        if "SKIP" in line:
            assert len(line.split("SKIP", 1)[1].strip()) > 0, line


def test_pytest_plugin_option(author_dir: Path) -> None:
    (author_dir / "test_my_backend.py").write_text(
        "from fxworld_conformance import WorldSuite\n\nclass TestMine(WorldSuite):\n    pass\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         "--fxworld-world=my_backend_factories:make", "-k", "w01 or w02",
         "test_my_backend.py"],
        cwd=author_dir, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert " passed" in r.stdout
