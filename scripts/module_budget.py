"""Check the module-size budget, a ratchet: no module of the packages is longer than
``[tool.fxworld.module-budget] lines`` (pyproject.toml) unless it is listed under
``exceptions``, with its reason and the size it had when listed::

    [tool.fxworld.module-budget.exceptions]
    "pkg/big.py" = { lines = 947, why = "one unit: ..." }

A listed module may shrink but never grow past its recorded size. A listed module
that is back under the budget, or gone, is an error too: the list says only what is
true today.

    python scripts/module_budget.py [ROOT]

Prints each offender on a line, then how to update the list, and exits 1; prints one
summary line and exits 0 when the budget holds. ``scripts/test`` runs it beside ruff.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

HOW_TO_UPDATE = """\
How to update: split a module that grew (small modules named for what they hold),
rather than raising its recorded size. A module that shrank may record its new size
(lower `lines` in [tool.fxworld.module-budget.exceptions], pyproject.toml); one back
within the budget, or gone, leaves the list. A new exception is
    "path/to/module.py" = { lines = <its size>, why = "<why it stays one unit>" }
and needs a reason a reviewer accepts."""


def _exception(name: str, entry: Any) -> tuple[int, str] | str:
    """``(recorded lines, reason)``, or what is wrong with the entry."""
    if not isinstance(entry, dict):
        return f'{name}: record its size: "{name}" = {{ lines = <size>, why = "<reason>" }}'
    lines, why = entry.get("lines"), entry.get("why", "")
    if not isinstance(lines, int) or isinstance(lines, bool) or lines < 1:
        return f"{name}: its exception needs `lines`, the size it is held to"
    if not isinstance(why, str) or not why.strip():
        return f"{name}: its exception needs `why`, the reason it stays one unit"
    return lines, why


def offences(root: Path) -> list[str]:
    config = tomllib.loads((root / "pyproject.toml").read_text())
    budget = config["tool"]["fxworld"]["module-budget"]
    limit: int = budget["lines"]
    packages: list[str] = config["tool"]["mypy"]["packages"]
    sizes = {
        path.relative_to(root).as_posix(): len(path.read_text().splitlines())
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }
    found: list[str] = []
    recorded: dict[str, int] = {}
    for name, entry in budget.get("exceptions", {}).items():
        parsed = _exception(name, entry)
        if isinstance(parsed, str):
            found.append(parsed)
            recorded[name] = limit  # held to the budget until the entry is right
        else:
            recorded[name] = parsed[0]
    for name, lines in sizes.items():
        if name not in recorded and lines > limit:
            found.append(
                f"{name}: {lines} lines, over the budget of {limit}: split it "
                "(or list it as an exception, with its size and a reason)"
            )
        elif name in recorded and lines > max(recorded[name], limit):
            found.append(
                f"{name}: {lines} lines, grown past its recorded {recorded[name]}: split it"
            )
    for name in recorded:
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
    if found:
        print(HOW_TO_UPDATE, file=sys.stderr)
        return 1
    print("module budget: every module within its budget or its recorded size")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
