"""The README's Quickstart: one file, also examples/quickstart.py, that runs with only
``pip install -e .`` (no extra, no key, no server), twice in a row in one folder, and
prints what the README shows. And the README's world example, which also runs twice."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
QUICKSTART = REPO / "examples" / "quickstart.py"

# What `pip install -e .` does not install: the extras' distributions.
EXTRAS = (
    "sqlalchemy asyncpg redis hiredis aiobotocore botocore hypothesis pytest "
    "openai anthropic starlette uvicorn httpx"
).split()
NO_EXTRAS = f"""
import importlib.abc, runpy, sys
class NoExtras(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {EXTRAS!r}:
            raise ImportError(f"{{name}} is not installed by pip install -e .")
sys.meta_path.insert(0, NoExtras())
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _section(title: str) -> str:
    text = README.read_text()
    match = re.search(rf"^## {title}\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, f"README.md has no section {title!r}"
    return match.group(1)


def _run(script: Path, cwd: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(script)], cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_readme_has_a_quickstart_whose_block_is_examples_quickstart() -> None:
    headings = re.findall(r"^## (.*)$", README.read_text(), re.M)
    assert headings[:2] == ["Set up on a fresh machine", "Quickstart"]
    block = re.search(r"```python\n(.*?)```", _section("Quickstart"), re.S)
    assert block, "the Quickstart has no Python block"
    assert block.group(1) == QUICKSTART.read_text()


def test_the_quickstart_runs_twice_in_one_folder_and_prints_what_the_readme_shows(
    tmp_path: Path,
) -> None:
    shown = re.search(r"then the answer:\n\n```\n(.*?)```", _section("Quickstart"), re.S)
    assert shown, "the Quickstart no longer shows its output"
    expected = [_without_ids(line) for line in shown.group(1).splitlines()]
    for _ in range(2):  # the same folder: the second run finds the first run's world
        assert [_without_ids(line) for line in _run(QUICKSTART, tmp_path)] == expected
    assert (tmp_path / ".fxworld" / "world.db").exists()


def _without_ids(line: str) -> str:
    return re.sub(r"idempotency key [0-9a-f]+…?", "idempotency key …", line)


def test_the_quickstart_needs_no_extra_no_key_and_no_server(tmp_path: Path) -> None:
    runner = tmp_path / "no_extras.py"
    runner.write_text(NO_EXTRAS)
    done = subprocess.run(
        [sys.executable, str(runner), str(QUICKSTART)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},  # no FXWORLD_URL, no key
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("answer: Order A-1001")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_readme_world_example_runs_twice_in_one_folder(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    match = re.search(r"```python\n(import asyncio\n.*?)```", README.read_text(), re.S)
    assert match, "the README lost its world example"
    source = match.group(1)
    if backend == "postgres":  # the same example on a real server (one namespace, twice)
        url = request.getfixturevalue("pg_url")
        source, n = re.subn(r'open_world\("[^"]*"\)', f"open_world({url!r})", source)
        assert n == 1
    script = tmp_path / "world_example.py"
    script.write_text(source)
    for _ in range(2):
        lines = _run(script, tmp_path)
        assert lines[0] == "the replaced writer is refused; nothing was written"
        assert [line.split()[:3] for line in lines[1:]] == [
            ["1", "prompt", "None"],
            ["2", "fence", "1"],
            ["3", "reply", "1"],
            ["4", "fence", "2"],
        ]
