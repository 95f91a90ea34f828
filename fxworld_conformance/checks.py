"""The kit's checks, in one list: :data:`CHECKS`, which both doors run.

``run_kit`` (and the CLI) runs the checks of :data:`CHECKS` in its order, and
``WorldSuite`` has one test per check of it (``test_directed[<id>]``,
``test_engine[<id>]``, ``test_capacity``, ``test_stateful[<machine>]``,
``test_processes``); ``--select`` and ``run_kit(select=)`` pick checks by their
:attr:`Check.id`. Each row of the list holds what runs the check: nothing finds a
check by its name. The list is made from the tiers' own tables: the scenarios of
:data:`fxworld_conformance.guarantees.SCENARIOS` and of
:data:`fxworld_conformance.engine.SCENARIOS` (importing it loads no module of the
engine: a scenario does, when it runs), the capacity check, the state machines of
:data:`fxworld_conformance.stateful.MACHINES`, and the process tier.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from fxworld_conformance.capacity import NAME as CAPACITY
from fxworld_conformance.capacity import capacity_check
from fxworld_conformance.checkers import CHECKS as CHECKERS
from fxworld_conformance.engine import SCENARIOS as ENGINE_SCENARIOS
from fxworld_conformance.engine import EngineScenario
from fxworld_conformance.guarantees import SCENARIOS, Scenario
from fxworld_conformance.profiles import TIERS
from fxworld_conformance.report import ENGINE, CheckResult, kit_error
from fxworld_conformance.rows import run_engine_one, run_one
from fxworld_conformance.stateful import MACHINES, run_machine
from fxworld_conformance.target import Target

__all__ = ["Check", "Settings", "CHECKS", "find"]


@dataclass(frozen=True)
class Settings:
    """How a run of the kit runs each check."""

    profile: str = "ci"
    seed: int = 0
    shrink_seconds: float | None = None


@dataclass(frozen=True)
class Check:
    """One check of the kit: one row of :data:`CHECKS`."""

    id: str
    """Its id for ``--select`` (``w05-expect``, ``context-saved-and-seen``,
    ``capacity``, ``stateful-log``, ``processes``)."""
    name: str
    """Its row in the kit's report (``W5 expect: ...``)."""
    tier: str
    """One of :data:`fxworld_conformance.profiles.TIERS`."""
    blame: tuple[str, ...]
    """What it fails when it runs past its time bound and no world call in flight
    names its own guarantee."""
    run: Callable[[Target, Settings], list[CheckResult]]
    """Runs it on a target: its rows (the process tier's are several)."""


def _directed(s: Scenario) -> Check:
    return Check(s.id, s.name, "directed", s.guarantees[:1], lambda t, _: [run_one(s, t)])


def _engine(s: EngineScenario) -> Check:
    return Check(s.id, s.name, "engine", (ENGINE,), lambda t, _: [run_engine_one(s, t)])


def _capacity(target: Target, how: Settings) -> list[CheckResult]:
    return [run_one(capacity_check(how.profile), target)]


def _machine(name: str, covers: tuple[str, ...]) -> Check:
    def run(target: Target, how: Settings) -> list[CheckResult]:
        return [
            run_machine(
                name,
                target,
                profile=how.profile,
                seed=how.seed,
                shrink_seconds=how.shrink_seconds,
            )
        ]

    return Check(name.replace(" ", "-"), name, "stateful", covers, run)


def _processes(target: Target, how: Settings) -> list[CheckResult]:
    from fxworld_conformance.procs import run_process_checks

    started = time.monotonic()
    try:
        return run_process_checks(target, profile=how.profile, seed=how.seed)
    except Exception as e:  # the tier records the world's errors: this one is the kit's
        return [kit_error("processes", e, time.monotonic() - started)]


_PROCESS_GUARANTEES = tuple(
    sorted({g for c in CHECKERS for g in c.guarantees}, key=lambda g: int(g[1:]))
)

CHECKS: list[Check] = [
    *map(_directed, SCENARIOS),
    *map(_engine, ENGINE_SCENARIOS),
    Check("capacity", CAPACITY, "capacity", ("W10",), _capacity),
    *(_machine(name, covers) for name, (_, covers) in MACHINES.items()),
    Check("processes", "processes", "processes", _PROCESS_GUARANTEES, _processes),
]
"""Every check of the kit, tier by tier (:data:`~fxworld_conformance.profiles.TIERS`),
in the order ``run_kit`` runs them."""

assert [c.tier for c in CHECKS] == sorted((c.tier for c in CHECKS), key=TIERS.index)
assert len({c.id for c in CHECKS}) == len({c.name for c in CHECKS}) == len(CHECKS)


def find(name: str) -> Check:
    """The check of :data:`CHECKS` whose report row is ``name``; ``ValueError``
    naming them if none is."""
    for check in CHECKS:
        if check.name == name:
            return check
    raise ValueError(f"no check named {name!r}; known: {[c.name for c in CHECKS]}")
