"""The checkers of docs/contract.md section 5: each judges a whole
:class:`~fxworld_conformance.checkers.history.History` of one process-tier run and returns
the :class:`~fxworld_conformance.checkers.history.Finding` s it proves, each naming the
guarantee (W-number) broken and carrying the operations that prove it.

A call whose outcome is unknown (killed, cut, timed out) is judged by what
landed: if its entries are in the final log it owes all of them (W4), its wake
(W7) and its key (W6).

The checkers live by guarantee family in :mod:`~fxworld_conformance.checkers.log`,
:mod:`~fxworld_conformance.checkers.fences` and
:mod:`~fxworld_conformance.checkers.wakes`; this module holds their table
(:data:`CHECKS`) and exports every one of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fxworld_conformance.checkers.fences import (
    check_epochs,
    check_fenced_stays_out,
    check_new_epoch_refuses_old,
)
from fxworld_conformance.checkers.history import Finding, History
from fxworld_conformance.checkers.log import (
    check_batches_atomic,
    check_dense,
    check_follow,
    check_indeterminate,
    check_no_duplicates,
    check_no_lost,
    check_readers_agree,
    check_reads_monotone,
    check_refused_no_trace,
)
from fxworld_conformance.checkers.wakes import (
    check_lease_redelivery,
    check_wakes_never_early,
    check_wakes_never_lost,
)

__all__ = [
    "Check",
    "CHECKS",
    "run_checks",
    "check_dense",
    "check_no_duplicates",
    "check_no_lost",
    "check_readers_agree",
    "check_batches_atomic",
    "check_refused_no_trace",
    "check_indeterminate",
    "check_epochs",
    "check_fenced_stays_out",
    "check_follow",
    "check_reads_monotone",
    "check_wakes_never_early",
    "check_wakes_never_lost",
    "check_lease_redelivery",
    "check_new_epoch_refuses_old",
    "check_errors_typed",
]


@dataclass(frozen=True)
class Check:
    """One checker: a row of the kit's report."""

    name: str
    guarantees: tuple[str, ...]
    run: Callable[[History], list[Finding]]
    needs_drain: bool = False


def check_errors_typed(h: History) -> list[Finding]:
    """W16: every error a world raised is one of fxworld's (driver errors never leak)."""
    bad = [op for op in h.ops if not op.typed]
    if not bad:
        return []
    kinds = sorted({op.error or "?" for op in bad})
    return [
        Finding(
            "W16",
            f"{len(bad)} operations raised errors outside fxworld.errors: {'; '.join(kinds[:3])}",
            bad[:4],
        )
    ]


CHECKS: list[Check] = [
    Check("dense positions", ("W4", "W9"), check_dense),
    Check("no duplicates", ("W4", "W6"), check_no_duplicates),
    Check("no lost acknowledged append", ("W4", "W5", "W1"), check_no_lost),
    Check("readers agree on every position", ("W9",), check_readers_agree),
    Check("batches atomic", ("W4",), check_batches_atomic),
    Check("refused writes leave no trace", ("W2", "W3", "W5"), check_refused_no_trace),
    Check("indeterminate appends all or nothing", ("W4",), check_indeterminate),
    Check("epochs monotone along the log", ("W8", "W1"), check_epochs),
    Check("fenced writer stays out", ("W2",), check_fenced_stays_out),
    Check("follow prefix-consistent across reconnects", ("W10",), check_follow),
    Check("reads never go backwards", ("W9",), check_reads_monotone),
    Check("wakes never early", ("W11",), check_wakes_never_early),
    Check("wakes never lost", ("W7", "W13"), check_wakes_never_lost, needs_drain=True),
    Check("dead worker's wake delivered again", ("W12",), check_lease_redelivery),
    Check("redelivered worker's epoch refuses the old", ("W12", "W2"), check_new_epoch_refuses_old),
    Check("errors typed", ("W16",), check_errors_typed),
]
"""Every checker, in report order."""


def run_checks(h: History) -> list[tuple[Check, list[Finding]]]:
    """Run every checker on ``h``; a checker that needs a drained history and does
    not have one is given no violations."""
    results: list[tuple[Check, list[Finding]]] = []
    for check in CHECKS:
        if check.needs_drain and not h.drained:
            results.append((check, []))
            continue
        results.append((check, check.run(h)))
    return results
