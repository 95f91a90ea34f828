"""The kit loads the engine only when its engine tier runs: importing any of its
doors (the package, the pytest plugin and suite, the CLI, the table of checks, the
engine tier's own table) loads no module of ``fxworld.engine``, nor does running
the other tiers; and the kit reaches the engine only through its public names
(``fxworld`` or ``fxworld.engine``), never through one of its modules."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parents[2] / "fxworld_conformance"

LOADED = (
    "import sys\n"
    "print(sorted(m for m in sys.modules if m == 'fxworld.engine' "
    "or m.startswith('fxworld.engine.')))"
)


def _engine_modules_after(code: str) -> str:
    """The ``fxworld.engine`` modules loaded after ``code`` runs in a fresh process."""
    proc = subprocess.run(
        [sys.executable, "-c", f"{code}\n{LOADED}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "module",
    [
        "fxworld_conformance",
        "fxworld_conformance.plugin",
        "fxworld_conformance.suite",
        "fxworld_conformance.test_world",
        "fxworld_conformance.cli",
        "fxworld_conformance.runner",
        "fxworld_conformance.checks",
        "fxworld_conformance.engine",
        "fxworld.commands.conformance",
    ],
)
def test_importing_a_door_of_the_kit_loads_no_engine_module(module: str) -> None:
    assert _engine_modules_after(f"import {module}") == "[]"


def test_the_directed_tier_runs_without_the_engine_and_the_engine_tier_loads_it() -> None:
    run = (
        "from fxworld_conformance import Target, run_kit\n"
        "rows = run_kit(Target(url='memory://'), profile='quick', select={select!r})\n"
        "assert [r.status for r in rows] == ['passed'], rows"
    )
    assert _engine_modules_after(run.format(select=["w05-expect"])) == "[]"
    assert _engine_modules_after(run.format(select=["answers-validated"])) != "[]"


def test_the_kit_names_no_module_of_the_engine() -> None:
    import fxworld.engine

    public = set(fxworld.engine.__all__)
    named = []
    for path in sorted(KIT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            modules = []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module == "fxworld.engine":
                modules = [f"fxworld.engine.{a.name}" for a in node.names if a.name not in public]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            named += [
                f"{path.relative_to(KIT.parent)}: {m}"
                for m in modules
                if m.startswith("fxworld.engine.")
            ]
    assert named == []
