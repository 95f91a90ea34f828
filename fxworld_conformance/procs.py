"""Tier 2: real OS processes race on shared sessions under crashes and cut connections.

Stub: the harness is being written; the entry point's signature is fixed.
"""

from __future__ import annotations

from fxworld_conformance.report import CheckResult
from fxworld_conformance.target import Target

__all__ = ["run_process_checks"]


def run_process_checks(target: Target, *, profile: str, seed: int) -> list[CheckResult]:
    """Run the process tier against ``target``; one :class:`CheckResult` per check."""
    return [
        CheckResult(
            name="processes",
            guarantees=("W1", "W2", "W4", "W8", "W9", "W10", "W11", "W12", "W13"),
            status="skipped",
            detail="process tier not implemented yet",
        )
    ]
