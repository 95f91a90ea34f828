"""The kit never hangs: every check runs within a time bound, and one that runs past
it fails, saying what it waited for, while the other checks still run and the
report prints, from both doors (the CLI and pytest). Shown with two broken worlds
that make a check wait without end: one whose ``acquire`` hands out epoch 1 again
(the engine tier's turns never end), one whose ``take_wake`` never returns. The
bounds here are 1 s, so the tests are quick; each subprocess has its own timeout,
so a kit that hangs fails the test instead of hanging it."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fxworld.embedded.memory import MemoryWorld
from fxworld.errors import ConfigurationError
from fxworld.types import WakeLease
from fxworld_conformance import bounds
from fxworld_conformance.broken import BROKEN
from fxworld_conformance.report import ENGINE
from fxworld_conformance.runner import by_guarantee, check_ids, run_check, run_kit
from fxworld_conformance.target import Target

EPOCH = "fxworld_conformance.broken:epoch_handed_out_again"
HANGS = "fxworld_conformance.broken:take_wake_hangs"

ENDLESS = "engine context: saved with the first prompt, read by every tool of every turn"
"""The engine scenario that waits without end on a world that hands out epoch 1
again: its turn never ends."""


def _kit(*args: str) -> subprocess.CompletedProcess[str]:
    """``fxworld conformance ...`` in a fresh process, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "fxworld", "conformance", *args],
        capture_output=True,
        text=True,
        timeout=240,  # far past the bounds of the checks it runs: a hang fails the test
    )


def _pytest(tmp_path: Path, world: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The kit's pytest door in a fresh process, as a backend author runs it."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
         str(tmp_path), "--pyargs", "fxworld_conformance.test_world", f"--fxworld-world={world}",
         "--fxworld-profile=quick", "--fxworld-check-timeout=1", *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )  # fmt: skip


def test_the_cli_fails_a_turn_that_never_ends_in_bounded_time_and_prints_the_report(
    tmp_path: Path,
) -> None:
    report = tmp_path / "out.json"
    select = "w01-acquire,context-saved-and-seen,answers-validated"
    proc = _kit("--world", EPOCH, "--profile", "quick", "--check-timeout", "1",
                "--select", select, "--report", str(report), "-q")  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    rows = {m[1]: m[0] for m in re.finditer(r"^(W\d+|engine) .* (?:PASS|FAIL|SKIP) .*$", out, re.M)}
    assert "FAIL" in rows["W1"], out  # the directed tier fails W1 at once
    assert "FAIL" in rows["engine"] and "did not finish within 1 s" in rows["engine"], out
    # what it waited for: the check, and the line of it in flight (the turn awaited)
    assert f"--- FAILED {ENDLESS} [engine]" in out, out
    assert "it was waiting at fxworld_conformance/engine/context.py:" in out, out
    assert "await first" in out, out
    assert "3 checks: 1 passed, 2 failed" in out, out  # the next check still ran
    data = json.loads(report.read_text())
    [stuck] = [r for r in data["results"] if r["name"] == ENDLESS]
    assert stuck["extra"]["time_bound"] == 1 and stuck["extra"]["ended"] is True
    assert [r["status"] for r in data["results"]] == ["failed", "failed", "passed"]


def test_the_cli_fails_a_take_wake_that_never_returns_naming_the_call(tmp_path: Path) -> None:
    proc = _kit("--world", HANGS, "--profile", "quick", "--check-timeout", "1",
                "--select", "w05-expect,w12-one-taker,w17-capabilities", "-q")  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    [row] = [line for line in out.splitlines() if line.startswith("W12 ")]
    assert "FAIL" in row and "did not finish within 1 s" in row, out
    assert "it was waiting for take_wake(lease=" in row, out  # the world call in flight
    assert "in TakeWakeHangs.take_wake: await asyncio.Event().wait()" in out, out  # where
    # a call the scenario made itself: the world's method it waited in
    [row] = [line for line in out.splitlines() if line.startswith("W5 ")]
    assert "it was waiting in the world's TakeWakeHangs.take_wake() (" in row, out
    assert "3 checks: 1 passed, 2 failed" in out, out


def test_the_pytest_door_fails_a_turn_that_never_ends_and_runs_the_next(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, EPOCH, "-k", "context-saved-and-seen or answers-validated")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "1 failed, 1 passed" in out, out
    assert f"engine broken ({ENDLESS}):" in out, out
    assert "did not finish within 1 s (its time bound); it was waiting at " in out, out
    assert "fxworld_conformance/engine/context.py:" in out and "await first" in out, out


def test_the_pytest_door_fails_a_take_wake_that_never_returns(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, HANGS, "-k", "w12-one-taker or w17")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "1 failed, 1 passed" in out, out
    assert "W12 broken (W12 a due wake goes to one taker" in out, out
    assert "it was waiting for take_wake(lease=" in out, out


def test_the_broken_worlds_are_in_the_set_naming_their_bug() -> None:
    assert BROKEN["epoch_handed_out_again"][1] == "W1"
    assert BROKEN["take_wake_hangs"][1] == "W11"


def test_a_stuck_world_call_fails_the_guarantee_it_was_made_for() -> None:
    factory = BROKEN["take_wake_hangs"][0]
    name = check_ids()["w06-keyed-repeat-owes-no-wake"]
    [row] = run_check(name, Target(factory=factory, check_timeout=0.5), profile="quick")
    assert (row.status, row.guarantees) == ("failed", ("W6",)), row
    assert row.detail.startswith(
        "did not finish within 0.5 s (its time bound); it was waiting for take_wake(lease=5)\n"
    ), row.detail
    assert "It was cancelled then and ended" in row.detail, row.detail


class Deaf(MemoryWorld):
    """A world whose ``take_wake`` ignores even a cancel: the kit cannot stop it."""

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                continue


def test_a_check_that_ignores_the_cancel_is_left_behind_and_the_kit_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bounds, "GRACE", 0.5)
    results = run_kit(
        Target(factory=Deaf, check_timeout=0.5), select=["w12-one-taker", "w17-capabilities"]
    )
    assert [r.status for r in results] == ["failed", "passed"]
    assert "had not ended 0.5 s later: it is left running in the background" in results[0].detail
    assert "it was waiting for take_wake(lease=5)" in results[0].detail, results[0].detail
    assert "in Deaf.take_wake: await asyncio.sleep(3600)" in results[0].detail


def test_an_engine_check_past_its_bound_fails_the_engine_row_only() -> None:
    factory = BROKEN["epoch_handed_out_again"][0]
    [row] = run_check(ENDLESS, Target(factory=factory, check_timeout=0.5), profile="quick")
    assert (row.status, row.guarantees) == ("failed", (ENGINE,)), row
    assert by_guarantee([row])["W1"][0] == "skipped"


@pytest.mark.parametrize("bad", [0, -1, float("inf"), "5", True])
def test_a_bad_time_bound_is_refused(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="check_timeout"):
        Target(factory=MemoryWorld, check_timeout=bad)


@pytest.mark.parametrize("bad", ["0", "-2", "soon", "inf"])
def test_the_cli_refuses_a_bad_time_bound(bad: str) -> None:
    proc = _kit("--world", "memory://", "--check-timeout", bad)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--check-timeout: not a number of seconds > 0" in proc.stderr, proc.stderr


def test_every_profile_bounds_every_tier() -> None:
    from fxworld_conformance.profiles import PROFILES, TIERS

    for row in PROFILES.values():
        assert set(row.bounds) == set(TIERS) and all(s > 0 for s in row.bounds.values())
