"""The kit's own failures are the kit's: an unknown profile is refused before
anything runs, and a crash inside the kit is a kit error with its traceback,
never a failed guarantee."""

from __future__ import annotations

from typing import Any

import pytest

from fxworld.embedded.memory import MemoryWorld
from fxworld_conformance import procs
from fxworld_conformance.checkers import CHECKS, Check, check_dense
from fxworld_conformance.guarantees import Probe, Scenario
from fxworld_conformance.profiles import PROFILES
from fxworld_conformance.runner import by_guarantee, check_names, run_check, run_kit, run_one
from fxworld_conformance.stateful import machine_settings
from fxworld_conformance.target import Target


class Counting:
    """A factory that counts the worlds it made."""

    def __init__(self) -> None:
        self.made = 0

    def __call__(self) -> MemoryWorld:
        self.made += 1
        return MemoryWorld()


def test_every_tier_reads_one_table_of_profiles() -> None:
    for name, row in PROFILES.items():
        assert (
            machine_settings("stateful log", name).max_examples == row.machines["stateful log"][0]
        )
        assert procs.PROFILES[name] is row.processes


@pytest.mark.parametrize("call", ["run_kit", "run_check:processes", "run_check:W1"])
def test_an_unknown_profile_is_refused_before_anything_runs(call: str) -> None:
    factory = Counting()
    target = Target(factory=factory)
    with pytest.raises(ValueError, match=r"unknown kit profile 'fast'.*quick, ci, thorough"):
        if call == "run_kit":
            run_kit(target, profile="fast")
        else:
            name = call.split(":", 1)[1]
            if name == "W1":
                name = next(n for n in check_names() if n.startswith("W1"))
            run_check(name, target, profile="fast")
    assert factory.made == 0


def test_an_unknown_tier_is_refused_before_anything_runs() -> None:
    factory = Counting()
    with pytest.raises(ValueError, match="unknown tier"):
        run_kit(Target(factory=factory), tiers=("directed", "procs"))
    assert factory.made == 0


async def buggy_check(p: Probe) -> None:
    check_dense(None)  # type: ignore[arg-type]  # a bug inside the kit's own code


def test_a_crash_inside_a_directed_check_is_a_kit_error() -> None:
    d = Scenario("w04-buggy", "W4 a check with a bug", ("W4",), buggy_check)
    row = run_one(d, Target(factory=MemoryWorld))
    assert row.status == "error" and row.guarantees == ()
    assert "kit error" in row.detail and "Traceback" in row.detail and "check_dense" in row.detail
    assert all(status != "failed" for status, _ in by_guarantee([row]).values())


def test_a_crash_inside_a_checker_is_a_kit_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_checker(h: Any) -> list[Any]:
        return check_dense(None)  # type: ignore[arg-type]

    checks = [Check("a checker with a bug", ("W4",), broken_checker), *CHECKS]
    monkeypatch.setattr(procs, "CHECKS", checks)
    rows = run_check("processes", Target(factory=MemoryWorld), profile="quick", seed=3)
    bad = [r for r in rows if r.status == "error"]
    assert [r.name for r in bad] == ["processes: a checker with a bug"]
    assert "Traceback" in bad[0].detail
    assert [r.name for r in rows if r.status == "failed"] == []


async def asserts_wrongly(p: Probe) -> None:
    assert await p.world.read("s") == ["an entry"]  # the world is right, the assert says no


def test_a_failed_assert_in_a_scenario_breaks_its_guarantee_and_is_no_kit_error() -> None:
    d = Scenario("w09-wrong", "W9 an assert that fails", ("W9", "W4"), asserts_wrongly)
    row = run_one(d, Target(factory=MemoryWorld))
    assert (row.status, row.guarantees) == ("failed", ("W9",))
    assert "assert await p.world.read" in row.detail


def test_a_scenario_that_needs_what_the_world_lacks_is_skipped_saying_what() -> None:
    from fxworld.protocol import WakeLister

    d = Scenario("w12-x", "W12 needs", ("W12",), asserts_wrongly, needs=("shared", WakeLister))
    row = run_one(d, Target(factory=MemoryWorld))
    assert row.status == "skipped"
    assert row.detail == "the world lacks the capability 'shared'"  # MemoryWorld lists wakes
