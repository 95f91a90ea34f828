"""Both doors of the kit run one table: ``WorldSuite`` (pytest) has one test per
check of ``run_kit`` (and the CLI), and no other."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from fxworld_conformance import checks
from fxworld_conformance.capacity import NAME as CAPACITY
from fxworld_conformance.checks import CHECKS, Check
from fxworld_conformance.engine import SCENARIOS as ENGINE_SCENARIOS
from fxworld_conformance.guarantees import SCENARIOS
from fxworld_conformance.report import CheckResult
from fxworld_conformance.runner import check_ids, check_names, run_check, run_kit
from fxworld_conformance.suite import (
    CAPACITY_CHECK,
    DIRECTED_CHECKS,
    ENGINE_CHECKS,
    MACHINE_CHECKS,
    PROCESS_CHECK,
)
from fxworld_conformance.target import Target


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


def test_both_doors_take_their_checks_from_the_one_list() -> None:
    params = [p.values[0] for p in [*DIRECTED_CHECKS, *ENGINE_CHECKS]]
    params.append(CAPACITY_CHECK.name)
    params += [p.values[0] for p in MACHINE_CHECKS]
    params.append(PROCESS_CHECK.name)
    assert params == [c.name for c in CHECKS] == check_names()
    assert list(check_ids()) == [c.id for c in CHECKS]


def test_a_check_in_the_one_list_is_run_by_its_id_and_by_its_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[str] = []

    def run(target: Target, how: checks.Settings) -> list[CheckResult]:
        ran.append(how.profile)
        return [CheckResult("W17 an extra check", ("W17",), "passed")]

    extra = Check("w17-extra", "W17 an extra check", "directed", ("W17",), run)
    monkeypatch.setattr(checks, "CHECKS", [*CHECKS, extra])
    rows = run_kit(Target(url="memory://"), profile="quick", select=["w17-ex*"])
    assert [r.name for r in rows] == ["W17 an extra check"] and ran == ["quick"]
    assert run_check("W17 an extra check", Target(url="memory://"))[0].status == "passed"
    assert check_ids(["directed"])["w17-extra"] == "W17 an extra check"
