"""W19 agent routing in both of the kit's doors: the CLI (``fxworld conformance``) and
the pytest plugin fail the broken worlds ``take_returns_other_agents_wake`` and
``take_starves_an_agent``, naming W19; a world without the seam is skipped, saying
why, as W17 says a world lacks a capability."""

from __future__ import annotations

from pathlib import Path

import pytest

from fxworld.cli import main
from fxworld.embedded.memory import MemoryWorld
from fxworld_conformance.runner import run_kit
from fxworld_conformance.target import Target
from tests.conformance.test_cli import run_pytest


@pytest.mark.parametrize(
    ("broken", "caught"),
    [
        ("take_returns_other_agents_wake", "w19-only-own-wakes"),
        ("take_starves_an_agent", "w19-no-starvation"),
    ],
)
def test_the_cli_fails_each_broken_world_of_w19(
    broken: str, caught: str, capsys: pytest.CaptureFixture[str]
) -> None:
    world = f"fxworld_conformance.broken:{broken}"
    rc = main(["conformance", "--world", world, "--select", "w19-*", "-q"])
    out = capsys.readouterr().out
    assert rc == 1, out
    row = next(line for line in out.splitlines() if line.startswith("W19 "))
    assert "FAIL" in row and "agent routing" in row, out
    assert "--- FAILED W19" in out


def test_the_pytest_plugin_fails_a_world_that_hands_out_another_agents_wake(
    tmp_path: Path,
) -> None:
    proc = run_pytest(
        tmp_path,
        "--pyargs",
        "fxworld_conformance.test_world",
        "--fxworld-world=fxworld_conformance.broken:take_returns_other_agents_wake",
        "-k",
        "w19",
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "W19 broken" in proc.stdout, proc.stdout


class WithoutTheSeam(MemoryWorld):
    """A world as a third party writes it before the seam: isinstance(AgentRouter) is
    false (its methods are absent)."""

    claim = None  # type: ignore[assignment]
    owner = None  # type: ignore[assignment]
    take_wakes_for = None  # type: ignore[assignment]


def test_a_world_without_the_seam_is_skipped_saying_why() -> None:
    results = run_kit(Target(factory=WithoutTheSeam), tiers=("directed",), select=["w19-*"])
    assert results and all(r.status == "skipped" for r in results), results
    assert all("AgentRouter" in r.detail for r in results), [r.detail for r in results]
