"""Both doors of the kit run one table: ``WorldSuite`` (pytest) has one test per
check of ``run_kit`` (and the CLI), and no other."""

from __future__ import annotations

import re
import subprocess
import sys

from fxworld_conformance.capacity import NAME as CAPACITY
from fxworld_conformance.engine import SCENARIOS as ENGINE_SCENARIOS
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
    engine_by_id = {s.id: s.name for s in ENGINE_SCENARIOS}
    names = []
    for test in re.findall(r"::TestWorld::(\S+)", out):
        if m := re.fullmatch(r"test_directed\[(.+)\]", test):
            names.append(by_id[m.group(1)])
        elif m := re.fullmatch(r"test_engine\[(.+)\]", test):
            names.append(engine_by_id[m.group(1)])
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
    assert {s.name for s in ENGINE_SCENARIOS} <= set(suite)  # the engine tier too
    assert {s.part for s in ENGINE_SCENARIOS} == {"context", "answers", "steps", "agents"}


def test_each_engine_scenario_has_its_own_id_and_name_and_starts_with_its_part() -> None:
    assert len({s.id for s in ENGINE_SCENARIOS}) == len({s.name for s in ENGINE_SCENARIOS})
    assert len({s.id for s in ENGINE_SCENARIOS}) == len(ENGINE_SCENARIOS)
    for s in ENGINE_SCENARIOS:
        assert s.id.startswith(f"{s.part}-") and s.name.startswith(f"engine {s.part}: "), s


def test_each_scenario_has_its_own_id_and_name_and_starts_with_its_guarantee() -> None:
    assert len({s.id for s in SCENARIOS}) == len({s.name for s in SCENARIOS}) == len(SCENARIOS)
    for s in SCENARIOS:
        w = s.guarantees[0]
        assert s.name.startswith(f"{w} ") and s.id.startswith(f"w{int(w[1:]):02d}-"), s
