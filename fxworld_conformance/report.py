"""The kit's results: one row per check, grouped by guarantee W1-W19 (and the
engine tier's checks under :data:`ENGINE`)."""

from __future__ import annotations

import traceback
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["Status", "CheckResult", "GUARANTEES", "ENGINE", "ROWS", "kit_error"]

Status = Literal["passed", "failed", "skipped", "error"]
"""``error``: the kit itself failed (its own bug, a bad profile, a child process
that could not start); it is a verdict on no guarantee."""

GUARANTEES: dict[str, str] = {
    "W1": "acquire",
    "W2": "fenced append",
    "W3": "unfenced append",
    "W4": "atomic, dense, ordered",
    "W5": "expect",
    "W6": "idempotency key",
    "W7": "append + wake is atomic",
    "W8": "epoch-monotone log",
    "W9": "read",
    "W10": "follow",
    "W11": "wake coalescing",
    "W12": "lease",
    "W13": "finish",
    "W14": "delete",
    "W15": "bad input",
    "W16": "errors",
    "W17": "capabilities",
    "W18": "large values",
    "W19": "agent routing",
}

ENGINE = "engine"
"""What a check of the engine tier (:mod:`fxworld_conformance.engine`) names in
``guarantees``: the turn engine on the world, not one guarantee W1-W19."""

ROWS: dict[str, str] = {**GUARANTEES, ENGINE: "the turn engine on it"}
"""The rows of the kit's summary: each guarantee, then the engine."""


@dataclass
class CheckResult:
    """The outcome of one check of one or more guarantees.

    ``detail`` holds, for a failure, the shrunk counterexample or the history
    excerpt that proves it; for a skip, the missing capability and why.
    ``examples`` counts Hypothesis examples (tier 1), ``operations`` the world
    operations the check performed.
    """

    name: str
    guarantees: tuple[str, ...]
    status: Status
    detail: str = ""
    examples: int = 0
    operations: int = 0
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def kit_error(name: str, error: BaseException, seconds: float = 0.0) -> CheckResult:
    """The row of a check that the kit could not carry out: ``error`` with the
    traceback, blaming no guarantee."""
    trace = "".join(traceback.format_exception(error, limit=12))
    return CheckResult(
        name=name,
        guarantees=(),
        status="error",
        detail=f"kit error (a failure of the kit, not of the world): "
        f"{type(error).__name__}: {error}\n{trace}",
        seconds=seconds,
    )
