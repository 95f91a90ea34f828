"""Both doors of the kit run one table: ``WorldSuite`` (pytest) has one test per
check of ``run_kit`` (and the CLI), and no other."""

from __future__ import annotations

import re
import subprocess
import sys

from fxworld_conformance.capacity import NAME as CAPACITY
from fxworld_conformance.guarantees import SCENARIOS
from fxworld_conformance.runner import check_names


def _world_suite_checks() -> list[str]:
    """The checks the tests of ``WorldSuite`` run, by the name ``run_kit`` gives
    them, as pytest collects them."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "--pyargs",
            "fxworld_conformance.test_world",
            "--fxworld-world=memory://",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    by_id = {s.id: s.name for s in SCENARIOS}
    names = []
    for test in re.findall(r"::TestWorld::(\S+)", out):
        if m := re.fullmatch(r"test_directed\[(.+)\]", test):
            names.append(by_id[m.group(1)])
        elif m := re.fullmatch(r"test_stateful\[(.+)\]", test):
            names.append(f"stateful {m.group(1)}")
        else:
            names.append({"test_capacity": CAPACITY, "test_processes": "processes"}[test])
    return names


def test_run_kit_and_world_suite_run_the_same_checks() -> None:
    suite = _world_suite_checks()
    assert len(suite) == len(set(suite))
    assert set(suite) == set(check_names())
    assert len(SCENARIOS) >= 60


def test_each_scenario_has_its_own_id_and_name_and_starts_with_its_guarantee() -> None:
    assert len({s.id for s in SCENARIOS}) == len({s.name for s in SCENARIOS}) == len(SCENARIOS)
    for s in SCENARIOS:
        w = s.guarantees[0]
        assert s.name.startswith(f"{w} ") and s.id.startswith(f"w{int(w[1:]):02d}-"), s
