"""`fxworld conformance` and the pytest plugin, as a backend author uses them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fxworld.cli import main


def test_cli_passes_a_correct_world_and_writes_a_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "out.json"
    rc = main(
        [
            "conformance",
            "--world",
            "memory://",
            "--tiers",
            "directed",
            "--report",
            str(report),
            "-q",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    for g in ("W1 ", "W9 ", "W17"):
        assert any(line.startswith(g) and "PASS" in line for line in out.splitlines()), out
    data = json.loads(report.read_text())
    assert data["guarantees"]["W2"] == "passed"
    assert data["operations"] > 100
    rows = {r["name"].split()[0] for r in data["results"]}  # each row starts with its W
    assert rows == {f"W{n}" for n in range(1, 20)}  # W1-W19


def test_cli_fails_a_broken_world_and_names_the_guarantee(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc = main(
        [
            "conformance",
            "--world",
            "fxworld_conformance.broken:key_ignored",
            "--tiers",
            "directed",
            "-q",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 1
    row = next(line for line in out.splitlines() if line.startswith("W6 "))
    assert "FAIL" in row and "key" in row
    assert "--- FAILED W6" in out


def test_cli_rejects_an_unloadable_world(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["conformance", "--world", "no_such_module_xyz:factory", "-q"])
    assert rc == 2
    assert "no_such_module_xyz" in capsys.readouterr().err


@pytest.mark.parametrize(
    "paths",
    [["--pyargs", "fxworld_conformance.test_world"], []],
    ids=["pyargs", "option-alone"],
)
def test_plugin_option_runs_the_kit_from_pytest(tmp_path: Path, paths: list[str]) -> None:
    # a backend author's one-line run: pytest [--pyargs ...] --fxworld-world=...
    # (with no test paths the plugin collects the kit's own tests)
    proc = run_pytest(
        tmp_path,
        *paths,
        "--fxworld-world=fxworld_conformance.broken:expect_ignored",
        "-k",
        "w05 and racing or w03",
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed, 1 passed" in proc.stdout, proc.stdout
    assert "W5 broken" in proc.stdout, proc.stdout


def test_plugin_skips_without_a_world(tmp_path: Path) -> None:
    proc = run_pytest(tmp_path, "--pyargs", "fxworld_conformance.test_world", "-k", "w03")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 skipped" in proc.stdout, proc.stdout


def run_pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A fresh ``pytest -q`` in ``cwd``, as a backend author runs it there."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args,
         "--rootdir", str(cwd)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )  # fmt: skip


def test_a_factory_that_returns_no_world_is_named(tmp_path: Path) -> None:
    (tmp_path / "notaworld.py").write_text("def make():\n    return None\n")
    proc = subprocess.run(
        [sys.executable, "-m", "fxworld", "conformance", "--world", "notaworld:make"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    assert "returned NoneType, not a World" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
