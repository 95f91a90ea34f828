"""docs/contract.md, the page that code, tests and docs cite by section: its table of
where the kit checks each guarantee is the kit's own, and every citation of a
contract section names this page and a section it has."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from fxworld_conformance.checkers import CHECKS
from fxworld_conformance.guarantees import SCENARIOS
from fxworld_conformance.stateful import MACHINES

REPO = Path(__file__).resolve().parents[2]
CONTRACT = REPO / "docs" / "contract.md"
CITATION = re.compile(r"contract(?:\.md)?,? (?:section|sections|§) ?(\d+)(?:[-\u2013](\d+))?", re.I)


def _table() -> dict[str, list[str]]:
    rows = re.findall(r"^\| (W\d+) \|(.*)\|$", CONTRACT.read_text(), re.M)
    return {w: [cell.strip() for cell in rest.split("|")] for w, rest in rows}


def _kit_row(w: str) -> list[str]:
    own = sum(s.guarantees[0] == w for s in SCENARIOS)
    also = sum(w in s.guarantees[1:] for s in SCENARIOS)
    machines = ", ".join(n.removeprefix("stateful ") for n, (_, g) in MACHINES.items() if w in g)
    checkers = "; ".join(c.name for c in CHECKS if w in c.guarantees)
    return [str(own), str(also), machines, checkers]


def test_docs_contract_md_lists_where_the_kit_checks_each_guarantee() -> None:
    table = _table()
    assert list(table) == [f"W{n}" for n in range(1, 20)]
    for w, cells in table.items():
        assert cells[1:] == _kit_row(w), f"docs/contract.md's row {w} is not the kit's"


def _sections() -> set[int]:
    return {int(n) for n in re.findall(r"^## (\d+)\. ", CONTRACT.read_text(), re.M)}


def _tracked() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files", "*.py", "*.md"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return [REPO / n for n in names if (REPO / n).exists()]


def test_every_citation_of_a_contract_section_names_docs_contract_md_and_an_existing_section() -> (
    None
):
    sections = _sections()
    assert sections == set(range(1, 7))
    wrong = []
    for path in _tracked():
        if path in (CONTRACT, Path(__file__)):
            continue
        for line_no, line in enumerate(path.read_text().splitlines(), 1):
            for m in CITATION.finditer(line):
                cited = range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1)
                named = "docs/contract.md" in line or "(contract.md" in line
                if not named or not set(cited) <= sections:
                    wrong.append(f"{path.relative_to(REPO)}:{line_no}: {line.strip()}")
    assert wrong == [], "cite a contract section as 'docs/contract.md section N':\n" + "\n".join(
        wrong
    )
