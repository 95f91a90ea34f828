"""Running the whole kit against one target, and summarising it per guarantee.

``run_kit(target, profile=..., seed=...)`` runs, in order: the directed tier
(the scenarios of :mod:`fxworld_conformance.guarantees`, one guarantee each,
fast), the engine tier (:mod:`fxworld_conformance.engine`: the turn engine's
newest features on the world, in one process), the capacity check
(:mod:`fxworld_conformance.capacity`: hundreds of idle followers, the world's
other calls timed beside them), the tier-1 state machines,
and the process tier (:func:`fxworld_conformance.procs.run_process_checks`: real OS processes,
crashes, cut connections, server restart). It returns one
:class:`~fxworld_conformance.report.CheckResult` per check; :func:`by_guarantee`
folds them into one row per guarantee W1-W17, and one for the engine.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import time
import traceback
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from fxworld_conformance.cleanup import cleaned, run_sync
from fxworld_conformance.guarantees import SCENARIOS, Scenario, Skip, run_scenario
from fxworld_conformance.model import Violation
from fxworld_conformance.profiles import profile as kit_profile
from fxworld_conformance.report import ENGINE, ROWS, CheckResult, Status, kit_error
from fxworld_conformance.target import Target

if TYPE_CHECKING:  # the engine tier loads the engine: only when it runs
    from fxworld_conformance.engine import EngineScenario

__all__ = [
    "run_kit",
    "run_check",
    "run_one",
    "run_engine_one",
    "check_names",
    "check_ids",
    "selected",
    "by_guarantee",
    "TIERS",
    "capabilities_of",
]

TIERS = ("directed", "engine", "capacity", "stateful", "processes")


def check_names(tiers: Iterable[str] = TIERS) -> list[str]:
    """The names of the checks of the given tiers, in the order ``run_kit`` runs them
    (the process tier counts as one name, ``processes``)."""
    from fxworld_conformance.capacity import NAME as CAPACITY
    from fxworld_conformance.engine import SCENARIOS as ENGINE_SCENARIOS
    from fxworld_conformance.stateful import MACHINES

    names: list[str] = []
    tiers = set(tiers)
    if "directed" in tiers:
        names += [s.name for s in SCENARIOS]
    if "engine" in tiers:
        names += [s.name for s in ENGINE_SCENARIOS]
    if "capacity" in tiers:
        names.append(CAPACITY)
    if "stateful" in tiers:
        names += list(MACHINES)
    if "processes" in tiers:
        names.append("processes")
    return names


def check_ids(tiers: Iterable[str] = TIERS) -> dict[str, str]:
    """Each check's short id -> its name (see :func:`check_names`), in the order
    ``run_kit`` runs them: a scenario's pytest id (``w02-fenced-append``, the
    engine's ``context-saved-and-seen``), ``capacity``, ``stateful-log``,
    ``stateful-wakes``, ``processes``."""
    from fxworld_conformance.capacity import NAME as CAPACITY
    from fxworld_conformance.engine import SCENARIOS as ENGINE_SCENARIOS

    ids = {s.name: s.id for s in SCENARIOS} | {s.name: s.id for s in ENGINE_SCENARIOS}
    ids[CAPACITY] = "capacity"
    return {ids.get(name, name.replace(" ", "-")): name for name in check_names(tiers)}


def selected(patterns: Iterable[str], tiers: Iterable[str] = TIERS) -> list[str]:
    """The names of the checks of ``tiers`` whose id matches one of ``patterns``
    (shell-style, ``w02-*``; see :func:`check_ids`), in ``run_kit``'s order. A
    pattern that matches none raises ``ValueError`` naming the ids."""
    ids = check_ids(tiers)
    patterns = [p.strip().lower() for p in patterns if p.strip()]
    if unmatched := [p for p in patterns if not fnmatch.filter(ids, p)]:
        raise ValueError(f"no check id matches {', '.join(unmatched)}; the ids: {', '.join(ids)}")
    return [name for i, name in ids.items() if any(fnmatch.fnmatch(i, p) for p in patterns)]


def capabilities_of(target: Target) -> frozenset[str]:
    """The capabilities the world declares plus the fixture's (``restartable``)."""

    async def probe() -> frozenset[str]:
        world = await target.open()
        try:
            caps: object = getattr(world, "capabilities", frozenset())
            if not isinstance(caps, (set, frozenset, list, tuple)):
                return frozenset()
            return frozenset(c for c in caps if isinstance(c, str))
        finally:
            await target.close(world)

    keep, target.keep = target.keep, False  # an empty namespace: nothing to look at
    try:
        with cleaned(target):
            caps = run_sync(probe())
    finally:
        target.keep = keep
    extra = set(target.extra_capabilities)
    if target.restart is not None:
        extra.add("restartable")
    return caps | extra


def run_check(
    name: str,
    target: Target,
    *,
    profile: str = "ci",
    seed: int = 0,
    shrink_seconds: float | None = None,
) -> list[CheckResult]:
    """Run one named check (see :func:`check_names`); the process tier returns
    several results, any other check one. An unknown profile or check name raises
    ``ValueError`` before anything runs. Ends by dropping the namespaces the
    check made (:func:`fxworld_conformance.cleanup.cleaned`), whatever happened."""
    kit_profile(profile)
    with cleaned(target):
        return _run_check(name, target, profile, seed, shrink_seconds)


def _run_check(
    name: str, target: Target, profile: str, seed: int, shrink_seconds: float | None
) -> list[CheckResult]:
    from fxworld_conformance.capacity import NAME as CAPACITY
    from fxworld_conformance.capacity import capacity_check
    from fxworld_conformance.stateful import MACHINES, run_machine

    if name == "processes":
        from fxworld_conformance.procs import run_process_checks

        started = time.monotonic()
        try:
            return run_process_checks(target, profile=profile, seed=seed)
        except Exception as e:  # the tier records the world's errors: this one is the kit's
            return [kit_error("processes", e, time.monotonic() - started)]
    if name == CAPACITY:
        return [run_one(capacity_check(profile), target)]
    if name in MACHINES:
        return [
            run_machine(name, target, profile=profile, seed=seed, shrink_seconds=shrink_seconds)
        ]
    for s in SCENARIOS:
        if s.name == name:
            return [run_one(s, target)]
    from fxworld_conformance.engine import SCENARIOS as ENGINE_SCENARIOS

    for es in ENGINE_SCENARIOS:
        if es.name == name:
            return [run_engine_one(es, target)]
    raise ValueError(f"no check named {name!r}; known: {check_names()}")


def run_one(d: Scenario, target: Target) -> CheckResult:
    """The row of one scenario: passed; skipped with its reason; failed with the
    guarantee a violation names (a bare failed ``assert`` in the scenario breaks
    the scenario's own); an error of the kit's own code is a kit error."""
    started = time.monotonic()
    counter = [0]
    notes: dict[str, Any] = {}
    try:
        ops, seconds = asyncio.run(run_scenario(d, target, counter, notes))
    except Skip as skip:
        return CheckResult(
            name=d.name,
            guarantees=d.guarantees,
            status="skipped",
            detail=str(skip),
            seconds=time.monotonic() - started,
        )
    except Violation as v:
        return CheckResult(
            name=d.name,
            guarantees=(v.guarantee,),
            status="failed",
            detail=v.message,
            operations=counter[0],
            seconds=time.monotonic() - started,
            extra={"covers": list(d.guarantees), **notes},
        )
    except Exception as e:
        own = isinstance(e, (AssertionError, TimeoutError))  # a failed assert or wait
        if raised_by_kit(e) and not own:
            return kit_error(d.name, e, time.monotonic() - started)
        g = d.guarantees[0] if own or _is_world_error(e) else "W16"
        return CheckResult(
            name=d.name,
            guarantees=(g,),
            status="failed",
            detail=f"{type(e).__name__}: {e}\n" + traceback.format_exc(limit=6),
            operations=counter[0],
            seconds=time.monotonic() - started,
            extra={"covers": list(d.guarantees), **notes},
        )
    return CheckResult(
        name=d.name,
        guarantees=d.guarantees,
        status="passed",
        operations=ops,
        seconds=seconds,
        extra=notes,
    )


def run_engine_one(s: EngineScenario, target: Target) -> CheckResult:
    """The row of one engine scenario: passed; failed with what the engine did (a
    failed check, a wait that ran out, an error the engine or the world raised); an
    error of the kit's own code is a kit error."""
    from fxworld_conformance.engine import run_engine_scenario

    started = time.monotonic()
    try:
        asyncio.run(run_engine_scenario(s, target))
    except Exception as e:
        own = isinstance(e, (AssertionError, TimeoutError))
        if raised_by_kit(e) and not own:
            return kit_error(s.name, e, time.monotonic() - started)
        told = str(e) if isinstance(e, AssertionError) and str(e) else f"{type(e).__name__}: {e}"
        return CheckResult(
            name=s.name,
            guarantees=(ENGINE,),
            status="failed",
            detail=f"{told}\n" + traceback.format_exc(limit=8),
            seconds=time.monotonic() - started,
        )
    return CheckResult(
        name=s.name, guarantees=(ENGINE,), status="passed", seconds=time.monotonic() - started
    )


def raised_by_kit(e: BaseException) -> bool:
    """Whether ``e`` was raised in the kit's own code (a bug of the kit's), not in
    the world's (whose foreign exceptions break W16)."""
    tb = e.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    if last is None or _is_world_error(e):
        return False
    kit = os.path.dirname(os.path.abspath(__file__))
    where = os.path.relpath(os.path.abspath(last), kit)  # the broken worlds are worlds
    return not where.startswith(("..", "broken" + os.sep))


def _is_world_error(e: BaseException) -> bool:
    from fxworld.errors import WorldError

    return isinstance(e, WorldError)


def run_kit(
    target: Target,
    *,
    profile: str = "ci",
    seed: int = 0,
    tiers: Iterable[str] = TIERS,
    fail_fast: bool = False,
    progress: Callable[[CheckResult], None] | None = None,
    shrink_seconds: float | None = None,
    select: Iterable[str] | None = None,
) -> list[CheckResult]:
    """Run the kit against ``target``; one result per check.

    ``profile`` is a name of :data:`fxworld_conformance.profiles.PROFILES`:
    ``ci`` (bounded, derandomized: a few minutes per backend), ``thorough`` or
    ``quick``; ``seed`` makes a run repeatable with other random choices;
    ``fail_fast`` stops at the first failed check; ``progress`` is called with
    each result as it comes; ``select`` keeps only the checks whose id matches one
    of its patterns (:func:`selected`). Each check drops the namespaces it made
    when it ends, unless ``target.keep`` (:mod:`fxworld_conformance.cleanup`).
    """
    kit_profile(profile)  # an unknown profile is refused before anything runs
    tiers = list(tiers)
    if unknown := [t for t in tiers if t not in TIERS]:
        raise ValueError(f"unknown tier(s) {unknown}; choose from {list(TIERS)}")
    names = check_names(tiers) if select is None else selected(select, tiers)
    results: list[CheckResult] = []
    for name in names:
        for result in run_check(
            name, target, profile=profile, seed=seed, shrink_seconds=shrink_seconds
        ):
            results.append(result)
            if progress is not None:
                progress(result)
        if fail_fast and any(r.status == "failed" for r in results):
            break
    return results


def by_guarantee(results: list[CheckResult]) -> dict[str, tuple[Status, list[CheckResult]]]:
    """One verdict per guarantee W1-W17, and one for the engine (:data:`ENGINE`):
    ``failed`` if any check names it broken, else ``passed`` if any check covering
    it passed, else ``skipped``."""
    out: dict[str, tuple[Status, list[CheckResult]]] = {}
    for g in ROWS:
        failed = [r for r in results if r.status == "failed" and g in r.guarantees]
        passed = [r for r in results if r.status == "passed" and g in r.guarantees]
        skipped = [r for r in results if r.status == "skipped" and g in r.guarantees]
        if failed:
            out[g] = ("failed", failed)
        elif passed:
            out[g] = ("passed", passed + skipped)
        else:
            out[g] = ("skipped", skipped)
    return out
