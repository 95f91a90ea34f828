"""The module-size budget that scripts/test runs beside ruff (scripts/module_budget.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _budget() -> ModuleType:
    path = ROOT / "scripts" / "module_budget.py"
    spec = importlib.util.spec_from_file_location("module_budget", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _project(tmp_path: Path, exceptions: dict[str, str], sizes: dict[str, int]) -> Path:
    """A project with a budget of 10 lines; ``exceptions`` maps a module to its entry's
    TOML value, e.g. ``'{ lines = 12, why = "one unit" }'``."""
    listed = "".join(f'"{name}" = {entry}\n' for name, entry in exceptions.items())
    (tmp_path / "pyproject.toml").write_text(
        '[tool.mypy]\npackages = ["pkg"]\n'
        "[tool.fxworld.module-budget]\nlines = 10\n"
        f"[tool.fxworld.module-budget.exceptions]\n{listed}"
    )
    (tmp_path / "pkg").mkdir()
    for name, lines in sizes.items():
        (tmp_path / "pkg" / name).write_text("x = 1\n" * lines)
    return tmp_path


def test_the_repository_keeps_its_module_budget() -> None:
    assert _budget().offences(ROOT) == []


def test_a_module_over_the_budget_is_named_unless_excepted_with_a_reason(tmp_path: Path) -> None:
    listed = {"pkg/big.py": '{ lines = 11, why = "one unit" }'}
    root = _project(tmp_path, listed, {"big.py": 11, "other.py": 11})
    assert [line.split(":")[0] for line in _budget().offences(root)] == ["pkg/other.py"]
    assert _budget().main(["module_budget.py", str(root)]) == 1


def test_an_exception_that_grows_past_its_recorded_size_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = {"pkg/big.py": '{ lines = 12, why = "one unit" }'}
    root = _project(tmp_path, listed, {"big.py": 12})
    assert _budget().main(["module_budget.py", str(root)]) == 0
    (root / "pkg" / "big.py").write_text("x = 1\n" * 13)
    assert _budget().offences(root) == [
        "pkg/big.py: 13 lines, grown past its recorded 12: split it"
    ]
    assert _budget().main(["module_budget.py", str(root)]) == 1
    assert "How to update" in capsys.readouterr().err
    (root / "pkg" / "big.py").write_text("x = 1\n" * 11)  # shrinking is fine
    assert _budget().offences(root) == []


def test_an_exception_without_its_size_or_reason_is_named(tmp_path: Path) -> None:
    listed = {
        "pkg/a.py": '"one unit"',
        "pkg/b.py": '{ why = "one unit" }',
        "pkg/c.py": "{ lines = 12 }",
    }
    root = _project(tmp_path, listed, {"a.py": 12, "b.py": 12, "c.py": 12})
    found = _budget().offences(root)
    assert [line.split(":")[0] for line in found[:3]] == ["pkg/a.py", "pkg/b.py", "pkg/c.py"]
    assert "record its size" in found[0] and "lines" in found[1] and "why" in found[2]


def test_an_exception_that_no_longer_applies_is_named(tmp_path: Path) -> None:
    listed = {
        "pkg/small.py": '{ lines = 12, why = "was big" }',
        "pkg/gone.py": '{ lines = 12, why = "was big" }',
    }
    root = _project(tmp_path, listed, {"small.py": 10})
    found = _budget().offences(root)
    assert any(line.startswith("pkg/small.py: 10 lines, within") for line in found)
    assert any(line.startswith("pkg/gone.py: listed") for line in found)
