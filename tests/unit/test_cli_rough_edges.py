"""Bad input to the command line is one line and exit 2, never a traceback; the
version is one flag away; a scripted model refuses, when made, a reply it could not
play."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from fxworld import Agent
from fxworld.errors import InvalidArgument
from fxworld.testing import ScriptedModel

APP = """
from fxworld import Agent
from fxworld.testing import ScriptedModel
agent = Agent(model=ScriptedModel(["hi"]), world="memory://")
"""


def fxworld(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fxworld", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_version_prints_the_installed_version(tmp_path: Path) -> None:
    done = fxworld("--version", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.strip() == f"fxworld {version('fxworld')}"


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--lease", "0", "--lease: must be more than 0 seconds, not 0"),
        ("--lease", "nan", "--lease: must be more than 0 seconds, not nan"),
        ("--concurrency", "0", "--concurrency: must be at least 1, not 0"),
        ("--concurrency", "two", "--concurrency: not a whole number: 'two'"),
        ("--deadline", "-1", "--deadline: must be more than 0 seconds, not -1"),
    ],
)
def test_a_worker_with_a_bad_number_is_one_line_and_exit_2(
    tmp_path: Path, flag: str, value: str, said: str
) -> None:
    (tmp_path / "app.py").write_text(APP)
    done = fxworld("worker", "app:agent", flag, value, "--until-idle", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"fxworld worker: argument {said} (see fxworld worker --help)"
    ]
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_work_with_a_bad_lease_or_concurrency_is_a_typed_error() -> None:
    agent = Agent(model=ScriptedModel(["hi"]), world="memory://")
    with pytest.raises(InvalidArgument, match="lease must be more than 0 seconds"):
        asyncio.run(agent.work(lease=0, until_idle=True))
    with pytest.raises(InvalidArgument, match="concurrency must be at least 1"):
        asyncio.run(agent.work(concurrency=0, until_idle=True))


@pytest.mark.parametrize(
    "reply",
    [
        {"tool": "x", "input": {}, "extra": 1},
        {"tool": "", "input": {}},
        {"tool": "x", "input": "not a dict"},
        {"tool": "x", "input": {"a": float("nan")}},
        {"tool": "x", "input": {"a": object()}},
        [{"tool": "x"}, "text inside a list of calls"],
    ],
)
def test_scripted_model_refuses_a_reply_it_could_not_play(reply: object) -> None:
    with pytest.raises(TypeError, match="scripted"):
        ScriptedModel([reply])  # type: ignore[list-item]
