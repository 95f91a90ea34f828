"""Check the module-size budget: no module of the packages is longer than
``[tool.fxworld.module-budget] lines`` (pyproject.toml) unless it is listed under
``exceptions`` with its reason. A listed module that is back under the budget, or
gone, is an error too: the list says only what is true today.

    python scripts/module_budget.py [ROOT]

Prints each offender on a line and exits 1; prints one summary line and exits 0
when the budget holds. ``scripts/test`` runs it beside ruff.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path


def offences(root: Path) -> list[str]:
    config = tomllib.loads((root / "pyproject.toml").read_text())
    budget = config["tool"]["fxworld"]["module-budget"]
    limit: int = budget["lines"]
    excepted: dict[str, str] = budget.get("exceptions", {})
    packages: list[str] = config["tool"]["mypy"]["packages"]
    sizes = {
        path.relative_to(root).as_posix(): len(path.read_text().splitlines())
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }
    found = [
        f"{name}: {lines} lines, over the budget of {limit}: split it, or list it under "
        "[tool.fxworld.module-budget.exceptions] in pyproject.toml with a reason"
        for name, lines in sizes.items()
        if lines > limit and not excepted.get(name, "").strip()
    ]
    for name in excepted:
        if name not in sizes:
            found.append(f"{name}: listed as an exception to the module budget, but not found")
        elif sizes[name] <= limit:
            found.append(
                f"{name}: {sizes[name]} lines, within the budget of {limit}: "
                "take it off the exceptions"
            )
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    found = offences(root)
    for line in found:
        print(line, file=sys.stderr)
    if not found:
        print("module budget: every module within its budget")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
