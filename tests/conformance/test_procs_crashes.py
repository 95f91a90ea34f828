"""The process tier has teeth under crashes: every broken world whose defect only a
crash or a freeze inside a call shows (a write split in two steps, an append
acknowledged before it is written) fails a ci-profile run, naming the guarantee.

The worlds are SqliteWorlds with one defect each
(:mod:`fxworld_conformance.broken.url`), opened by URL
(``broken+sqlite:///path?defect=NAME``) by real OS processes that the tier kills
and freezes inside their calls.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fxworld_conformance.broken import url as broken_url
from fxworld_conformance.broken.url import DEFECTS, url
from fxworld_conformance.procs import run_process_checks
from fxworld_conformance.report import CheckResult
from fxworld_conformance.target import Target

SEED = 4242

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL and SIGSTOP")


@pytest.fixture(autouse=True)
def broken_scheme() -> Iterator[None]:
    """``broken+sqlite://`` is known here (and in the tier's children) only."""
    broken_url.register()
    yield
    broken_url.unregister()


def violated(rows: list[CheckResult]) -> set[str]:
    return {g for r in rows if r.status == "failed" for g in r.extra.get("violated", [])}


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_the_process_tier_fails_the_broken_world(defect: str, tmp_path: Path) -> None:
    world = DEFECTS[defect]
    rows = run_process_checks(
        Target(url=url(f"{tmp_path}/world.db", defect)), profile="ci", seed=SEED
    )
    found = violated(rows)
    assert world.breaks in found, f"{defect} ({world.what}) breaks {world.breaks}; found {found}"
    assert found <= {world.breaks, *world.also}, f"{defect}: also blamed {found - world.also}"
    named = next(r for r in rows if world.breaks in r.extra.get("violated", []))
    assert f"{world.breaks}: " in named.detail and f"seed {SEED}" in named.detail
    assert named.extra["mode"] == "processes"


def test_an_unknown_defect_is_refused() -> None:
    from fxworld import open_world
    from fxworld.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="wake_two_steps"):
        open_world("broken+sqlite:///x.db?defect=nope")
