"""The process tier has teeth: each deliberately broken world it can reach fails it,
and the failure names the guarantee broken and prints the operations proving it.

The broken worlds are MemoryWorlds (:mod:`fxworld_conformance.broken`), so the
tier runs as tasks in one process; the worlds run side by side in threads to keep
this file quick.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from fxworld.embedded.memory import MemoryWorld
from fxworld_conformance.broken import BROKEN
from fxworld_conformance.procs import run_process_checks
from fxworld_conformance.report import CheckResult
from fxworld_conformance.target import Target

# The broken worlds whose bug a racing workload can reach (the others break
# delete, bad input or capabilities: tier 1's business).
REACHABLE = [
    "stale_fence",
    "hole_filled_late",
    "torn_batch",
    "key_ignored",
    "expect_ignored",
    "wake_early",
    "append_wake_lost",
    "rewake_lost_on_finish",
    "lease_twice",
    "follow_skips_first",
    "leaky_errors",
]

SEED = 4242


@pytest.fixture(scope="module")
def results() -> dict[str, list[CheckResult]]:
    def run(name: str) -> list[CheckResult]:
        return run_process_checks(Target(factory=BROKEN[name][0]), profile="quick", seed=SEED)

    with ThreadPoolExecutor(len(REACHABLE)) as pool:
        return dict(zip(REACHABLE, pool.map(run, REACHABLE), strict=True))


@pytest.mark.parametrize("name", REACHABLE)
def test_broken_world_fails_the_process_tier(
    name: str, results: dict[str, list[CheckResult]]
) -> None:
    breaks = BROKEN[name][1]
    failed = [r for r in results[name] if r.status == "failed"]
    assert failed, f"{name} ({BROKEN[name][2]}) passed the process tier"
    named = [r for r in failed if breaks in r.extra.get("violated", [])]
    assert named, (
        f"{name} breaks {breaks} but the failures name "
        f"{sorted({g for r in failed for g in r.extra.get('violated', [])})}"
    )
    detail = named[0].detail
    # The failure says which guarantee, and shows at least one recorded operation.
    assert re.search(rf"^{breaks}: ", detail, re.MULTILINE), detail
    assert re.search(r"\[\s*[\d.]+ \.\. +[\d.]+\] \S+ +\w+\(", detail), detail
    assert f"seed {SEED}" in detail


@pytest.mark.parametrize("name", ["lease_twice", "rewake_lost_on_finish"])
def test_a_wake_failure_shows_its_sessions_wake_history(
    name: str, results: dict[str, list[CheckResult]]
) -> None:
    """A wake finding is followed by its session's requests, takes, renewals and
    finishes up to then, the finding's own operations marked."""
    breaks = BROKEN[name][1]
    [row] = [r for r in results[name] if breaks in r.extra.get("violated", [])]
    shown = re.search(
        r"^  session (\S+)'s wake requests, takes, renewals and finishes up to then:\n"
        r"((?:(?:    |  \* )\S.*\n?)+)",
        row.detail,
        re.MULTILINE,
    )
    assert shown, row.detail
    lines = shown.group(2).splitlines()
    assert any(line.startswith("  * [") for line in lines), row.detail
    assert all(f"({shown.group(1)}: " in line for line in lines if "[" in line), row.detail


class SetupLeaks(MemoryWorld):
    """A world whose setup lets a driver error escape."""

    async def setup(self) -> None:
        raise KeyError("driver: schema table missing")


def test_a_world_that_cannot_be_set_up_fails_with_the_reason() -> None:
    rows = run_process_checks(Target(factory=SetupLeaks), profile="quick", seed=SEED)
    assert [(r.status, r.guarantees) for r in rows] == [("failed", ("W16",))]
    assert "schema table missing" in rows[0].detail
