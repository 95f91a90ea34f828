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
folds them into one row per guarantee W1-W19, and one for the engine.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from fxworld_conformance.bounds import bounded
from fxworld_conformance.cleanup import cleaned, run_sync
from fxworld_conformance.profiles import TIERS
from fxworld_conformance.profiles import profile as kit_profile
from fxworld_conformance.report import ROWS, CheckResult, Status
from fxworld_conformance.rows import raised_by_kit, run_engine_one, run_one
from fxworld_conformance.target import Target

if TYPE_CHECKING:  # the table loads Hypothesis: only when checks are listed or run
    from fxworld_conformance.checks import Check

__all__ = [
    "run_kit",
    "run_check",
    "run_one",
    "run_engine_one",
    "raised_by_kit",
    "check_names",
    "check_ids",
    "selected",
    "by_guarantee",
    "TIERS",
    "capabilities_of",
]


def _checks(tiers: Iterable[str] = TIERS) -> list[Check]:
    """The checks of the given tiers, from the one list
    (:data:`fxworld_conformance.checks.CHECKS`), in its order."""
    from fxworld_conformance.checks import CHECKS

    tiers = set(tiers)
    return [c for c in CHECKS if c.tier in tiers]


def check_names(tiers: Iterable[str] = TIERS) -> list[str]:
    """The names of the checks of the given tiers, in the order ``run_kit`` runs them
    (the process tier counts as one name, ``processes``)."""
    return [c.name for c in _checks(tiers)]


def check_ids(tiers: Iterable[str] = TIERS) -> dict[str, str]:
    """Each check's short id -> its name (see :func:`check_names`), in the order
    ``run_kit`` runs them: a scenario's pytest id (``w02-fenced-append``, the
    engine's ``context-saved-and-seen``), ``capacity``, ``stateful-log``,
    ``stateful-wakes``, ``processes``."""
    return {c.id: c.name for c in _checks(tiers)}


def _selected(patterns: Iterable[str], tiers: Iterable[str]) -> list[Check]:
    checks = _checks(tiers)
    patterns = [p.strip().lower() for p in patterns if p.strip()]
    ids = [c.id for c in checks]
    if unmatched := [p for p in patterns if not fnmatch.filter(ids, p)]:
        raise ValueError(f"no check id matches {', '.join(unmatched)}; the ids: {', '.join(ids)}")
    return [c for c in checks if any(fnmatch.fnmatch(c.id, p) for p in patterns)]


def selected(patterns: Iterable[str], tiers: Iterable[str] = TIERS) -> list[str]:
    """The names of the checks of ``tiers`` whose id matches one of ``patterns``
    (shell-style, ``w02-*``; see :func:`check_ids`), in ``run_kit``'s order. A
    pattern that matches none raises ``ValueError`` naming the ids."""
    return [c.name for c in _selected(patterns, tiers)]


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
    name: str | Check,
    target: Target,
    *,
    profile: str = "ci",
    seed: int = 0,
    shrink_seconds: float | None = None,
) -> list[CheckResult]:
    """Run one check (a :class:`~fxworld_conformance.checks.Check`, or its name: see
    :func:`check_names`); the process tier returns several results, any other check
    one. An unknown profile or check name raises ``ValueError`` before anything
    runs. The check runs within its time bound (``target.check_timeout``, else the
    profile's for its tier: :mod:`fxworld_conformance.bounds`); past it, it fails
    saying what it waited for. Ends by dropping the namespaces the check made
    (:func:`fxworld_conformance.cleanup.cleaned`), whatever happened."""
    from fxworld_conformance.checks import Settings, find

    row = kit_profile(profile)
    check = find(name) if isinstance(name, str) else name
    seconds = target.check_timeout or row.bounds[check.tier]
    how = Settings(profile, seed, shrink_seconds)
    with cleaned(target):
        return bounded(check.name, check.blame, seconds, lambda: check.run(target, how))


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
    checks = _checks(tiers) if select is None else _selected(select, tiers)
    results: list[CheckResult] = []
    for check in checks:
        for result in run_check(
            check, target, profile=profile, seed=seed, shrink_seconds=shrink_seconds
        ):
            results.append(result)
            if progress is not None:
                progress(result)
        if fail_fast and any(r.status == "failed" for r in results):
            break
    return results


def by_guarantee(results: list[CheckResult]) -> dict[str, tuple[Status, list[CheckResult]]]:
    """One verdict per guarantee W1-W19, and one for the engine (:data:`ENGINE`):
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
