"""The README's world example runs as written and prints what its comments say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_world_example_runs(tmp_path: Path) -> None:
    text = README.read_text()
    match = re.search(r"```python\n(import asyncio\n.*?)```", text, re.S)
    assert match, "the README lost its world example"
    script = tmp_path / "example.py"
    script.write_text(match.group(1))
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "the replaced writer is refused; nothing was written"
    assert [line.split()[:3] for line in lines[1:]] == [
        ["1", "prompt", "None"],
        ["2", "fence", "1"],
        ["3", "reply", "1"],
        ["4", "fence", "2"],
    ]


def test_readme_opens_with_the_two_setup_commands() -> None:
    block = re.search(
        r"## Set up on a fresh machine\n\n```bash\n(.*?)```", README.read_text(), re.S
    )
    assert block
    commands = [line.split("#")[0].strip() for line in block.group(1).strip().splitlines()]
    assert commands == [
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && fxworld demo",
        "bash scripts/test",
    ]
    assert Path(README.parent, "scripts", "test").exists()
    assert "Python 3.11, 3.12 or 3.13" in README.read_text()
    # scripts/test installs from the lock the README names, and makes its own venv
    script = Path(README.parent, "scripts", "test").read_text()
    assert "requirements/dev.lock" in script and "~/.cache/fxworld/venvs/" in script
