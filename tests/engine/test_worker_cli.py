"""`fxworld worker`: finding the agent, and --until-idle / --deadline."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

import pytest

from fxworld import Agent, open_world
from fxworld.testing import ScriptedModel

pytestmark = pytest.mark.timeout(120)


async def run_cli(*args: str, cwd: Path) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "fxworld.cli", *args, cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 100)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_worker_runs_an_agent_from_a_file_until_idle(tmp_path: Path) -> None:
    (tmp_path / "myagent.py").write_text(
        textwrap.dedent(
            """
            from fxworld import Agent, tool
            from fxworld.testing import ScriptedModel

            @tool(idempotent=True)
            def double(x: int) -> int:
                return 2 * x

            agent = Agent(ScriptedModel([{"tool": "double", "input": {"x": 21}}, "It is 42."]),
                          tools=[double])
            """
        )
    )
    url = f"sqlite:///{tmp_path}/w.db"
    client = Agent(ScriptedModel(["-"]), world=open_world(url))
    turn = client.session().prompt("double 21")
    await turn.accepted
    code, out = await run_cli(
        "worker", "myagent.py:agent", "--world", url, "--until-idle", "--lease", "5",
        cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, out
    assert await asyncio.wait_for(turn, 10) == "It is 42."


async def test_worker_refuses_a_bad_target(tmp_path: Path) -> None:
    code, out = await run_cli("worker", "no_colon_here", cwd=tmp_path)
    assert code == 2 and "expected module:name" in out
    code, out = await run_cli("worker", "no_such_module_xyz:agent", cwd=tmp_path)
    assert code == 2 and "cannot import 'no_such_module_xyz'" in out
    (tmp_path / "notagent.py").write_text("agent = 42\n")
    code, out = await run_cli("worker", "notagent:agent", cwd=tmp_path)
    assert code == 2 and "not an fxworld Agent" in out
