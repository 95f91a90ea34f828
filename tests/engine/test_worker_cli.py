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
QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.py"


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


async def test_a_module_that_fails_while_imported_is_one_line_naming_it_and_the_cause(
    tmp_path: Path,
) -> None:
    (tmp_path / "broken_app.py").write_text('raise ValueError("no API key in the config")\n')
    code, out = await run_cli("worker", "broken_app:agent", cwd=tmp_path)
    assert code == 2
    assert out.strip().splitlines() == [
        "fxworld: ConfigurationError: importing 'broken_app' failed: "
        "ValueError: no API key in the config"
    ]


async def test_an_unguarded_asyncio_run_at_import_is_one_line_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "eager.py").write_text("import asyncio\nasyncio.run(asyncio.sleep(0))\n")
    code, out = await run_cli("worker", "eager:agent", cwd=tmp_path)
    assert code == 2 and "Traceback" not in out, out
    line = next(x for x in out.splitlines() if x.startswith("fxworld:"))
    assert "importing 'eager' failed: RuntimeError: asyncio.run()" in line
    assert 'if __name__ == "__main__":' in line


async def test_the_quickstart_is_the_worker_module_the_readme_points_to(tmp_path: Path) -> None:
    (tmp_path / "quickstart.py").write_text(QUICKSTART.read_text())
    url = f"sqlite:///{tmp_path}/w.db"
    client = Agent(ScriptedModel(["-"]), world=open_world(url))
    turn = client.session().prompt("Please refund order A-1001.")
    await turn.accepted
    code, out = await run_cli(
        "worker", "quickstart:agent", "--world", url, "--until-idle", "--lease", "5",
        cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, out
    assert "Traceback" not in out, out
    answer = await asyncio.wait_for(turn, 10)
    assert answer == "Order A-1001 (the blue kettle) is refunded: 49.00."
