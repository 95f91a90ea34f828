"""Importing a backend package, or ``fxworld.validate``, loads neither the engine,
the model layer nor the web layer: a third-party backend depends on fxworld's
public names only, and pays for nothing else."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("fxworld.engine", "fxworld.web", "fxworld.models")


@pytest.mark.parametrize(
    "module",
    ["fxworld", "fxworld.validate", "fxworld.embedded.sqlite", "fxworld_postgres", "fxworld_redis",
     "fxworld_s3", "fxworld_conformance"],
)  # fmt: skip
def test_importing_loads_no_engine_nor_web_layer(module: str) -> None:
    code = (
        f"import json, sys, {module}\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({HEAVY!r}))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_the_engine_names_still_load_on_first_use() -> None:
    import fxworld
    from fxworld.engine import Agent

    assert fxworld.Agent is Agent
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = fxworld.Nope  # type: ignore[attr-defined]


def test_the_command_lines_parser_loads_only_the_log_format_and_the_summary_of_the_engine() -> None:
    code = (
        "import json, sys\nfrom fxworld.cli import build_parser\nbuild_parser()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('fxworld.engine'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [
        "fxworld.engine",
        "fxworld.engine.log",
        "fxworld.engine.summary",
    ]
