"""Tier 1: Hypothesis state machines drive a World beside the reference model.

Several logical writers, readers, followers and wake workers act on a few
sessions. Log operations (acquire, append, read) are split into *start* and
*complete*, so Hypothesis chooses how concurrent calls interleave on the
machine's event loop; when no call is in flight the machine checks the whole
group linearizably, one session at a time:

* every acknowledged write names its positions (the seq it returned), so the
  writes are ordered by position; they must be dense, not overlap, respect
  real-time order, and each must be what the model predicts at its point (W1,
  W2, W4, W5, W6, W8, W14);
* every other outcome (a read, ``Fenced``, ``Conflict``, a keyed repeat) must
  match the model at *some* point between the writes that finished before it
  started and those that started after it finished (W2, W3, W5, W6, W9);
* then a full read must equal the model's log (W4), and each follower must have
  yielded exactly the log after its cursor, within a bounded delay (W10).

Wake operations (wake, append with ``wake=``, take, renew, finish, lease expiry,
delete) run one at a time and are predicted exactly (W7, W11-W14). A failure
raises :class:`~fxworld_conformance.model.Violation` naming the guarantee;
Hypothesis shrinks it and prints the steps that replay it.

The machines' rules are in :mod:`~fxworld_conformance.stateful.log` and
:mod:`~fxworld_conformance.stateful.wakes`, what they share in
:mod:`~fxworld_conformance.stateful.base`, the linearizability check in
:mod:`~fxworld_conformance.stateful.linearizable`; this module runs them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.reporting import with_reporter
from hypothesis.stateful import (
    get_state_machine_test,
)

from fxworld.errors import WorldError
from fxworld_conformance.model import (
    Violation,
)
from fxworld_conformance.profiles import profile as kit_profile
from fxworld_conformance.report import CheckResult, kit_error
from fxworld_conformance.stateful.base import Stats, _KitMachine
from fxworld_conformance.stateful.log import LogMachine
from fxworld_conformance.stateful.wakes import WakeMachine
from fxworld_conformance.target import Target

__all__ = ["LogMachine", "WakeMachine", "Stats", "run_machine", "machine_settings", "MACHINES"]


MACHINES: dict[str, tuple[type[_KitMachine], tuple[str, ...]]] = {
    "stateful log": (
        LogMachine,
        ("W1", "W2", "W3", "W4", "W5", "W6", "W8", "W9", "W10", "W14"),
    ),
    "stateful wakes": (WakeMachine, ("W7", "W11", "W12", "W13", "W14")),
}
"""The tier-1 checks: name -> (machine, the guarantees it checks)."""


def machine_settings(name: str, profile: str, *, shrink: bool = True) -> settings:
    """Hypothesis settings of one machine under a kit profile (see
    :mod:`fxworld_conformance.profiles`)."""
    row = kit_profile(profile)
    examples, steps = row.machines[name]
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        derandomize=row.derandomize,
        database=None,
        print_blob=True,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.normal,
        phases=[Phase.explicit, Phase.generate, Phase.shrink]
        if shrink
        else [Phase.explicit, Phase.generate],
    )


def run_machine(
    name: str,
    target: Target,
    *,
    profile: str = "ci",
    seed: int = 0,
    shrink_seconds: float | None = None,
) -> CheckResult:
    """Run one tier-1 machine against ``target``; a failed result names the guarantee
    broken and carries the shrunk steps that replay it."""
    machine, covers = MACHINES[name]
    stats = Stats()
    bound = type(machine.__name__, (machine,), {"target": target, "stats": stats})
    s = machine_settings(name, profile, shrink=shrink_seconds != 0)
    if seed:
        s = settings(s, derandomize=False)
    test: Callable[[], None] = get_state_machine_test(bound, settings=s)  # type: ignore[no-untyped-call, unused-ignore]
    if seed:
        test = hypothesis_seed(seed)(test)
    lines: list[str] = []

    def collect(value: object) -> None:
        lines.append(str(value))

    started = time.monotonic()
    if shrink_seconds is None:
        shrink_seconds = kit_profile(profile).shrink_seconds
    try:
        with with_reporter(collect), _shrink_budget(shrink_seconds):
            test()
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        violation = _find_violation(e)
        if violation is None and not isinstance(e, (AssertionError, WorldError)):
            return kit_error(name, e, time.monotonic() - started)  # a bug of the kit's
        if violation is None:
            guarantees: tuple[str, ...] = covers
            message = f"{type(e).__name__}: {e}"
        else:
            guarantees = (violation.guarantee,)
            message = str(violation)
        notes = [n for n in getattr(e, "__notes__", []) if isinstance(n, str)]
        if violation is not None and violation is not e:
            notes += [n for n in getattr(violation, "__notes__", []) if isinstance(n, str)]
        steps = "\n".join(
            line
            for line in [*lines, *notes]
            if line.strip() and not line.startswith(("WARNING: Hypothesis has spent", "PLEASE"))
        )
        return CheckResult(
            name=name,
            guarantees=guarantees,
            status="failed",
            detail=f"{message}\n\nShrunk steps that replay it:\n{steps}",
            examples=stats.examples,
            operations=stats.operations,
            seconds=time.monotonic() - started,
            extra={"covers": list(covers)},
        )
    return CheckResult(
        name=name,
        guarantees=covers,
        status="passed",
        examples=stats.examples,
        operations=stats.operations,
        seconds=time.monotonic() - started,
        extra={"linearized_groups": stats.groups, "overlapping_groups": stats.overlapping},
    )


@contextlib.contextmanager
def _shrink_budget(seconds: float) -> Iterator[None]:
    """Bound the time Hypothesis spends shrinking a failure (its default is 300 s)."""
    from hypothesis.internal.conjecture import engine

    saved = getattr(engine, "MAX_SHRINKING_SECONDS", None)
    if saved is None:
        yield
        return
    engine.MAX_SHRINKING_SECONDS = seconds  # type: ignore[assignment]
    try:
        yield
    finally:
        engine.MAX_SHRINKING_SECONDS = saved


def _find_violation(e: BaseException) -> Violation | None:
    if isinstance(e, Violation):
        return e
    if isinstance(e, BaseExceptionGroup):
        for inner in e.exceptions:
            found = _find_violation(inner)
            if found is not None:
                return found
    cause = e.__cause__ or e.__context__
    return _find_violation(cause) if cause is not None and cause is not e else None
