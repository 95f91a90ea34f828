"""The kit has teeth: every deliberately broken world fails it, and the failure
names the guarantee that world breaks."""

from __future__ import annotations

import pytest

from fxworld_conformance.broken import BROKEN
from fxworld_conformance.capacity import NAME as CAPACITY
from fxworld_conformance.report import CheckResult
from fxworld_conformance.runner import by_guarantee, run_check, run_kit
from fxworld_conformance.stateful import run_machine
from fxworld_conformance.target import Target

# Which state machine must catch each broken world (W15-W17 are directed only).
MACHINE = {
    "stale_fence": "stateful log",
    "hole_filled_late": "stateful log",
    "torn_batch": "stateful log",
    "key_ignored": "stateful log",
    "expect_ignored": "stateful log",
    "epoch_reused": "stateful log",
    "follow_skips_first": "stateful log",
    "leaky_errors": "stateful log",
    "wake_early": "stateful wakes",
    "append_wake_lost": "stateful wakes",
    "rewake_lost_on_finish": "stateful wakes",
    "lease_twice": "stateful wakes",
    "delete_keeps_wake": "stateful wakes",
    "batch_retakes_leased": "stateful wakes",
}

# Broken worlds that only many idle followers at once expose: the capacity check's.
CAPACITY_ONLY = {"followers_hold_connections"}

# Broken worlds that make the kit's checks wait until their time bound: shown with a
# small bound in tests/conformance/test_bounds.py.
WAITS = {"take_wake_hangs"}


def _allowed(name: str) -> set[str]:
    factory = BROKEN[name][0]
    return {BROKEN[name][1], *getattr(factory, "also", frozenset())}


def _failed(results: list[CheckResult]) -> set[str]:
    return {g for r in results if r.status == "failed" for g in r.guarantees}


def test_at_least_eight_broken_worlds_each_breaking_a_distinct_guarantee() -> None:
    assert len(BROKEN) >= 8
    assert len({g for _, g, _ in BROKEN.values()}) >= 8


@pytest.mark.parametrize("name", sorted(set(BROKEN) - CAPACITY_ONLY - WAITS))
def test_directed_checks_fail_the_broken_world(name: str) -> None:
    factory, breaks, _ = BROKEN[name]
    results = run_kit(Target(factory=factory), tiers=("directed",))
    failed = _failed(results)
    assert breaks in failed, f"{name} breaks {breaks} but the kit failed only {sorted(failed)}"
    assert failed <= _allowed(name), (
        f"{name}: the kit also blamed {sorted(failed - _allowed(name))}"
    )
    assert by_guarantee(results)[breaks][0] == "failed"


@pytest.mark.parametrize("name", sorted(MACHINE))
def test_state_machine_fails_the_broken_world(name: str) -> None:
    factory, breaks, _ = BROKEN[name]
    result = run_machine(MACHINE[name], Target(factory=factory), shrink_seconds=0)
    assert result.status == "failed", f"{MACHINE[name]} did not catch {name}"
    assert set(result.guarantees) <= _allowed(name), (
        f"{name} breaks {breaks}; the machine blamed {result.guarantees}:\n{result.detail}"
    )


def test_a_failure_is_shrunk_and_replayable() -> None:
    factory = BROKEN["stale_fence"][0]
    result = run_machine("stateful log", Target(factory=factory), shrink_seconds=60)
    assert result.status == "failed"
    assert set(result.guarantees) <= _allowed("stale_fence")
    steps = [line for line in result.detail.splitlines() if line.startswith("state.")]
    assert 2 <= len(steps) <= 8, result.detail  # shrunk to a handful of steps
    assert "reproduce_failure" in result.detail  # the blob that replays it


def test_a_correct_world_passes_the_directed_checks() -> None:
    # the same checks that fail the broken worlds pass their unbroken parent
    from fxworld.embedded.memory import MemoryWorld

    results = run_kit(Target(factory=MemoryWorld), tiers=("directed",))
    assert [r.name for r in results if r.status != "passed"] == []


@pytest.mark.parametrize("name", sorted(CAPACITY_ONLY))
def test_capacity_check_fails_the_broken_world(name: str) -> None:
    factory, breaks, _ = BROKEN[name]
    [result] = run_check(CAPACITY, Target(factory=factory))
    assert result.status == "failed", result
    assert result.guarantees == (breaks,), result.detail
    assert "300" in result.detail and "followers" in result.detail, result.detail


def test_a_correct_world_passes_the_capacity_check() -> None:
    from fxworld.embedded.memory import MemoryWorld

    [result] = run_check(CAPACITY, Target(factory=MemoryWorld))
    assert result.status == "passed", result.detail
    assert set(result.extra["medians_ms"]) == {"append", "read", "wake", "take_wake", "finish_wake"}
