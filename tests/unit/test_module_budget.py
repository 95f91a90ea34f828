"""The module-size budget that scripts/test runs beside ruff (scripts/module_budget.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _budget() -> ModuleType:
    path = ROOT / "scripts" / "module_budget.py"
    spec = importlib.util.spec_from_file_location("module_budget", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _project(tmp_path: Path, exceptions: dict[str, str], sizes: dict[str, int]) -> Path:
    listed = "".join(f'"{name}" = "{why}"\n' for name, why in exceptions.items())
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
    root = _project(tmp_path, {"pkg/big.py": "one unit"}, {"big.py": 11, "other.py": 11})
    assert [line.split(":")[0] for line in _budget().offences(root)] == ["pkg/other.py"]
    assert _budget().main(["module_budget.py", str(root)]) == 1


def test_an_exception_that_no_longer_applies_is_named(tmp_path: Path) -> None:
    listed = {"pkg/small.py": "was big", "pkg/gone.py": "was big"}
    root = _project(tmp_path, listed, {"small.py": 10})
    found = _budget().offences(root)
    assert any(line.startswith("pkg/small.py: 10 lines, within") for line in found)
    assert any(line.startswith("pkg/gone.py: listed") for line in found)
