"""The embedded default world is one world per project, wherever a process starts:
the nearest ``.fxworld/`` in the working directory or a parent (as git finds
``.git``), named by its absolute path; a process that creates a new one says so
once on stderr. Finding: a worker in ``myapp/`` and a client one directory up used
two worlds, and the client waited forever."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from fxworld import SqliteWorld, selection, world
from fxworld.cli import main
from fxworld.errors import ConfigurationError
from fxworld.selection import default_url

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def fresh_selection(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(selection, "_current", None)
    monkeypatch.setattr(selection, "_current_from", None)
    monkeypatch.setattr(selection, "_announced", set())
    monkeypatch.delenv("FXWORLD_URL", raising=False)
    yield


def test_the_default_world_is_found_in_a_parent_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path.resolve()
    (project / ".fxworld").mkdir(0o755)  # (not group-writable, whatever the umask)
    (project / "web" / "views").mkdir(parents=True)
    monkeypatch.chdir(project / "web" / "views")
    assert default_url(creating=True) == f"sqlite:///{project}/.fxworld/world.db"
    chosen = world()
    assert isinstance(chosen, SqliteWorld) and chosen.path == f"{project}/.fxworld/world.db"
    assert capsys.readouterr().err == ""  # found, not created: nothing to say
    assert not (project / "web" / "views" / ".fxworld").exists()


def test_a_process_that_creates_the_default_world_says_so_once_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    here = tmp_path.resolve()
    monkeypatch.chdir(here)
    for _ in range(3):
        assert default_url(creating=True) == f"sqlite:///{here}/.fxworld/world.db"
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"fxworld: no .fxworld/ in {here} or its parents; "
        f"creating the default world {here}/.fxworld/world.db"
    ]
    assert default_url() == f"sqlite:///{here}/.fxworld/world.db"  # only looking: silent
    assert capsys.readouterr().err == ""


def test_a_world_set_by_the_process_is_used_with_no_default_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``world(x)``, then ``world()`` (as an Agent with no world of its own asks in
    a ``fxworld worker --world URL``): the world set, and no notice of a default
    world on stderr (it broke the worker's ``--log-format json`` lines)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FXWORLD_URL", raising=False)
    given = world(f"sqlite:///{tmp_path}/given.db")
    assert world() is given
    assert capsys.readouterr().err == ""
    assert not (tmp_path / ".fxworld").exists()


def test_a_cli_error_about_the_default_world_names_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["sessions", "list"]) == 2
    err = capsys.readouterr().err
    assert f"'{tmp_path.resolve()}/.fxworld/world.db' does not exist" in err, err
    assert not (tmp_path / ".fxworld").exists()


APP = """
from fxworld import Agent, tool
from fxworld.testing import ScriptedModel

@tool(idempotent=True)
def double(x: int) -> int:
    \"\"\"Double a number.\"\"\"
    return 2 * x

agent = Agent(ScriptedModel([{"tool": "double", "input": {"x": 21}}, "It is 42."]),
              tools=[double])
"""

CLIENT = """
import asyncio, sys
sys.path.insert(0, "app")
from myagent import agent

async def main() -> None:
    turn = agent.session("two-dirs").prompt("double 21")
    await turn.accepted
    print("accepted", flush=True)
    print("answer:", await asyncio.wait_for(turn, 60), flush=True)

asyncio.run(main())
"""


def test_a_worker_and_a_client_started_in_different_directories_share_one_world(
    tmp_path: Path,
) -> None:
    project = tmp_path.resolve() / "project"
    (project / "app").mkdir(parents=True)
    (project / "app" / "myagent.py").write_text(textwrap.dedent(APP))
    (project / "client.py").write_text(textwrap.dedent(CLIENT))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FXWORLD_")}
    # The client, at the project's root, creates the default world (and says so)...
    client = subprocess.Popen(
        [sys.executable, "client.py"], cwd=project, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert client.stdout is not None
        assert client.stdout.readline() == "accepted\n"
        # ...and a worker started in app/, one directory down, finds it and runs the turn.
        worker = subprocess.run(
            [sys.executable, "-m", "fxworld.cli", "worker", "myagent:agent", "--until-idle"],
            cwd=project / "app", env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert worker.returncode == 0, worker.stderr
        out, err = client.communicate(timeout=60)
    finally:
        if client.poll() is None:
            client.kill()
    assert out == "answer: It is 42.\n", (out, err)
    db = project / ".fxworld" / "world.db"
    assert err.count("creating the default world") == 1 and str(db) in err, err
    assert f"SqliteWorld('{db}'" in worker.stderr  # the ready line: the absolute path
    assert "creating the default world" not in worker.stderr
    assert not (project / "app" / ".fxworld").exists()


def _planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``.fxworld/`` in a shared parent, and the working directory below it."""
    shared = tmp_path.resolve()
    (shared / ".fxworld").mkdir(0o755)
    (shared / "me" / "project").mkdir(parents=True)
    monkeypatch.chdir(shared / "me" / "project")
    return shared / ".fxworld"


def test_a_world_folder_others_may_write_is_refused_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another local user could have planted sessions in it: this process would
    answer their prompts with its own tools. Refused, as git refuses a repository
    it does not trust, with one line saying what to do."""
    planted = _planted(tmp_path, monkeypatch)
    planted.chmod(0o777)  # chmod o+w, as a world dropped into /tmp would be
    with pytest.raises(ConfigurationError) as refused:
        world()
    message = str(refused.value)
    assert "\n" not in message
    assert str(planted) in message and "writable by group and others" in message
    assert "FXWORLD_URL" in message and f"chmod go-w {planted}" in message
    assert selection._current is None  # nothing opened
    assert not (planted / "world.db").exists()
    planted.chmod(0o775)
    with pytest.raises(ConfigurationError, match="writable by group"):
        default_url()
    planted.chmod(0o755)  # fixed as the message says: used
    assert default_url() == f"sqlite:///{planted}/world.db"


def test_a_world_folder_of_another_user_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    planted = _planted(tmp_path, monkeypatch)
    os.chown(planted, 4242, 4242)
    with pytest.raises(ConfigurationError) as refused:
        default_url(creating=True)
    message = str(refused.value)
    assert "owned by uid 4242, not by you (uid 0)" in message and "FXWORLD_URL" in message
    monkeypatch.setenv("FXWORLD_URL", f"sqlite:///{tmp_path}/mine.db")  # what it says to do
    assert isinstance(world(), SqliteWorld)


def test_a_world_file_of_another_user_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    planted = _planted(tmp_path, monkeypatch)
    (planted / "world.db").touch(0o644)
    os.chown(planted / "world.db", 4242, 4242)
    with pytest.raises(ConfigurationError, match="owned by uid 4242"):
        default_url()


def test_the_default_world_folder_is_made_so_that_it_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A umask that lets the group write (002, common) must not make fxworld refuse
    the folder it made itself."""
    monkeypatch.chdir(tmp_path)
    old = os.umask(0o002)
    try:
        made = world()
        assert isinstance(made, SqliteWorld)
        asyncio.run(made.setup())
        asyncio.run(made.close())
    finally:
        os.umask(old)
    monkeypatch.setattr(selection, "_current", None)
    assert default_url() == f"sqlite:///{tmp_path.resolve()}/.fxworld/world.db"
