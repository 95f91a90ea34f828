"""The ``fxworld`` command as a user runs it: inspecting a world with ``sessions``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from fxworld import NewEntry, open_world


def fxworld_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("fxworld")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "fxworld.cli"]


async def _fill(url: str, n: int) -> None:
    w = open_world(url)
    await w.setup()
    await w.append("s-1", [NewEntry("note", {"text": "x" * 80, "i": i}) for i in range(n)])
    await w.close()


def test_sessions_list_and_show(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/w.db"
    asyncio.run(_fill(url, 3))
    r = subprocess.run(
        [*fxworld_cmd(), "sessions", "list", "--world", url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "s-1" in r.stdout
    r = subprocess.run(
        [*fxworld_cmd(), "sessions", "show", "s-1", "--world", url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "note" in r.stdout


def test_output_piped_to_head_is_no_traceback(tmp_path: Path) -> None:
    # `fxworld sessions show ID | head -1`: the reader goes away early
    url = f"sqlite:///{tmp_path}/w.db"
    asyncio.run(_fill(url, 3000))
    proc = subprocess.Popen(
        [*fxworld_cmd(), "sessions", "show", "s-1", "--world", url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ},
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(120)
    assert "Traceback" not in err, err


def test_python_dash_m_fxworld(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/w.db"
    asyncio.run(_fill(url, 1))
    r = subprocess.run(
        [sys.executable, "-m", "fxworld", "sessions", "list", "--world", url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "s-1" in r.stdout
