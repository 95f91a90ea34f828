"""The ``fxworld`` command never guesses and never shows a password: a hostile URL
through every command, read-only commands that never create a SQLite file, a
missing session, a missing extra, and help texts in plain text."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fxworld import NewEntry, SqliteWorld, open_world
from fxworld.cli import EXTRAS, main
from fxworld.errors import ConfigurationError
from tests.support.ports import free_port

pytestmark = pytest.mark.timeout(240)

AGENT = """
from fxworld import Agent
from fxworld.testing import ScriptedModel

agent = Agent(ScriptedModel(["hi"]))
"""


def _never_creating(world: list[str]) -> list[list[str]]:
    """The commands that must never create a world's file, each with ``world``."""
    return [
        ["sessions", "list", *world],
        ["sessions", "show", "s1", *world],
        ["sessions", "approvals", "s1", *world],
        ["sessions", "approve", "s1", "x1", *world],
        ["sessions", "deny", "s1", "x1", *world],
        ["sessions", "stop", "s1", *world],
        ["sessions", "fork", "s1", *world],
        ["sessions", "prune", "--idle-for", "30d", *world],
        ["sessions", "prune", "--idle-for", "30d", "--dry-run", *world],
        ["bench", *world, "--seconds", "0.1", "--processes", "1"],
        ["export", *world, "--out", "sessions.jsonl"],
    ]


def _commands(url: str) -> list[list[str]]:
    """Every command that takes a world, each on ``url``."""
    world = ["--world", url]
    return [
        *_never_creating(world),
        ["setup", *world],
        ["worker", "agent.py:agent", *world, "--until-idle"],
        ["serve", "agent.py:agent", *world, "--allow-anyone", "--port", str(free_port())],
        ["conformance", "--world", url, "--quiet"],
        ["copy", "--from", url, "--to", url, "--session", "s1"],
        ["copy", "--from", "memory://", "--to", url, "--session", "s1"],
    ]


# One process runs every command on a URL (one interpreter start, not eleven),
# each through fxworld.cli.main exactly as the console script does; whatever a
# command lets escape is printed as a traceback.
_DRIVER = """
import json, sys, traceback
from fxworld.cli import main
for argv in json.loads(sys.argv[1]):
    print("=== " + " ".join(argv[:2]), flush=True)
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    except BaseException:
        traceback.print_exc()
        rc = "raised"
    sys.stderr.flush()
    print(f"=== rc={rc}", flush=True)
"""

HOSTILE = {
    "postgres-slash-in-password": ("postgresql://fx:Pg/Secret1@127.0.0.1:1/db", ["Secret1"]),
    "postgres-at-in-password": ("postgresql://fx:Pa@ss9w0rd@127.0.0.1:1/db", ["ss9w0rd"]),
    "redis-slash-in-password": ("redis://app:Xy7/Kq9@127.0.0.1:1/0", ["Xy7", "Kq9"]),
    "misspelt-scheme": ("reddis://app:Ty9pw0rd@127.0.0.1:1/0", ["Ty9pw0rd"]),
    "s3-token-in-endpoint-url": (
        "s3://fxworld-test/p?endpoint_url=http://127.0.0.1:1/%3Ftoken%3DTok3nXyz",
        ["Tok3nXyz"],
    ),
    "s3-credentials-in-endpoint-url": (
        "s3://fxworld-test/p?endpoint_url=http://key:EpS3cret9@127.0.0.1:1",
        ["EpS3cret9"],
    ),
}


@pytest.mark.parametrize(("url", "secrets"), HOSTILE.values(), ids=HOSTILE.keys())
def test_a_password_never_reaches_cli_output(tmp_path: Path, url: str, secrets: list[str]) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    env = {k: v for k, v in os.environ.items() if k != "FXWORLD_URL"}
    env |= {"AWS_ACCESS_KEY_ID": "fxworldtest", "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
    commands = _commands(url)
    r = subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps(commands)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=200,
    )  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    for secret in secrets:
        assert secret not in out, out
    assert "Traceback" not in out, out
    assert out.count("=== rc=2") == len(commands), out  # each refused, in its own words


@pytest.fixture
def seeded(tmp_path: Path) -> str:
    """A SQLite world holding session s1, as a URL."""

    async def seed() -> None:
        w = SqliteWorld(tmp_path / "shop.db")
        await w.append("s1", [NewEntry("prompt", {"text": "hi"})])
        await w.close()

    asyncio.run(seed())
    return f"sqlite:///{tmp_path}/shop.db"


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_read_only_commands_never_create_a_sqlite_file(
    seeded: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FXWORLD_URL", raising=False)
    before = _files(tmp_path)
    typo = seeded + "b"  # shop.dbb
    missing_dir = f"sqlite:///{tmp_path}/no/such/dir/w.db"
    for url in (typo, missing_dir, None):  # None: the default ./.fxworld/world.db
        world = ["--world", url] if url else []
        for argv in _never_creating(world):
            assert main(argv) == 2, argv
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "does not exist" in err, (argv, err)
    assert _files(tmp_path) == before  # no file, no directory
    # The one that may create it does; then the others find it.
    assert main(["setup", "--world", typo]) == 0
    assert main(["sessions", "list", "--world", typo]) == 0
    assert "0 sessions" in capsys.readouterr().err


def test_a_read_only_world_refuses_writes_and_changes_nothing(seeded: str) -> None:
    path = seeded.removeprefix("sqlite:///")

    async def go() -> None:
        w = open_world(seeded + "?mode=ro")
        try:
            assert [e.kind for e in await w.read("s1")] == ["prompt"]
            with pytest.raises(ConfigurationError, match="read-only"):
                await w.append("s1", [NewEntry("prompt", {"text": "more"})])
            with pytest.raises(ConfigurationError, match="read-only"):
                await w.wake("s1")
            with pytest.raises(ConfigurationError, match="read-only"):
                await w.delete("s1")
        finally:
            await w.close()
        with pytest.raises(ConfigurationError, match="mode must be one of"):
            open_world(seeded + "?mode=rwx")

    asyncio.run(go())
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("SELECT count(*) FROM fx_entries").fetchone()[0] == 1
        assert raw.execute("SELECT count(*) FROM fx_wakes").fetchone()[0] == 0
    finally:
        raw.close()


def test_a_missing_session_is_exit_1(seeded: str, capsys: pytest.CaptureFixture[str]) -> None:
    world = ["--world", seeded]
    for argv in (
        ["sessions", "approvals", "nope", *world],
        ["sessions", "approve", "nope", "x1", *world],
        ["sessions", "deny", "nope", "x1", "--reason", "no", *world],
        ["sessions", "stop", "nope", *world],
    ):
        assert main(argv) == 1, argv
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and "no session 'nope'" in err, (argv, err)
    assert main(["sessions", "show", "nope", *world]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "no session 'nope'" in err
    assert main(["sessions", "list", *world]) == 0  # nothing was written for 'nope'
    assert [x.split()[0] for x in capsys.readouterr().out.splitlines()] == ["s1"]


MISSING_EXTRA = {
    "conformance": (["conformance", "--world", "memory://"], "hypothesis", "conformance"),
    "serve": (["serve", "agent.py:agent", "--allow-anyone"], "uvicorn", "web"),
    "inspect": (["inspect", "--world", "memory://"], "uvicorn", "web"),
    "postgres": (
        ["sessions", "list", "--world", "postgresql://u@127.0.0.1:1/d"],
        "asyncpg",
        "postgres",
    ),
    "redis": (["bench", "--world", "redis://127.0.0.1:1/0"], "redis", "redis"),
    "s3": (["setup", "--world", "s3://b/?endpoint_url=http://127.0.0.1:1"], "aiobotocore", "s3"),
    "worker": (["worker", "agent.py:agent", "--world", "redis://127.0.0.1:1"], "redis", "redis"),
    "model": (["demo", "--model", "openai/gpt-4o"], "openai", "openai"),
}


@pytest.mark.parametrize(
    ("argv", "module", "extra"), MISSING_EXTRA.values(), ids=MISSING_EXTRA.keys()
)
def test_a_missing_extra_is_one_line_naming_the_pip_install(
    tmp_path: Path, argv: list[str], module: str, extra: str
) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules[{module!r}] = None  # as if the extra were not installed
        from fxworld.cli import main
        sys.exit(main({argv!r}))
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and f"pip install 'fxworld[{extra}]'" in r.stderr, r.stderr
    assert r.stdout == ""


def test_every_extra_module_is_named() -> None:
    """The table of extras covers what pyproject.toml's extras bring."""
    from importlib.metadata import requires

    for line in requires("fxworld") or []:
        name, _, marker = line.partition(";")
        extra = marker.split("extra ==")[-1].strip().strip("'\"") if "extra" in marker else ""
        module = name.split("[")[0].split(">")[0].split("=")[0].strip().lower()
        if extra in {"postgres", "redis", "s3", "conformance", "openai", "anthropic", "web"}:
            assert EXTRAS.get(module) == extra, line


HELPS = [
    [],
    *(
        [c]
        for c in ("demo", "worker", "sessions", "setup", "conformance", "bench", "serve", "inspect")
    ),
    *([c] for c in ("export", "import", "copy")),
    *(["sessions", a] for a in ("list", "show", "approvals", "approve", "deny", "stop")),
]


def test_help_texts_are_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    helps = {}
    for argv in HELPS:
        with pytest.raises(SystemExit) as done:
            main([*argv, "--help"])
        assert done.value.code == 0
        helps[" ".join(argv)] = text = capsys.readouterr().out
        for markup in ("``", ":mod:", ":func:", ":class:", "`"):
            assert markup not in text, (argv, markup, text)
    sessions = helps["sessions"]
    assert "Both take" not in sessions and "Every action takes --world URL" in sessions
    for action in ("list", "show", "approvals", "approve", "deny", "stop"):
        assert action in sessions
