"""Issue 45, item 6: each Python block of docs/integrations.md is a whole script:
saved as a file and run with ``python`` (the suite's virtualenv, this checkout's
code), it runs, and runs again in the same folder (its embedded world kept from
the first run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.blocks import REPO, python_blocks

DOC = "docs/integrations.md"


@pytest.mark.parametrize(("line", "source"), python_blocks(DOC), ids=lambda v: str(v)[:8])
def test_each_block_runs_as_a_script_twice(line: int, source: str, tmp_path: Path) -> None:
    script = tmp_path / f"block_{line}.py"
    script.write_text(source)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FXWORLD_")}
    env["PYTHONPATH"] = str(REPO)
    for attempt in ("first", "second"):
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{DOC}:{line}, {attempt} run:\n{done.stderr}"
    assert (tmp_path / ".fxworld").is_dir()  # the embedded world of the folder
