"""The README opens with its two set-up commands, and they are true. (Its code blocks:
tests/docs.)"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


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
