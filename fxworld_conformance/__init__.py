"""fxworld_conformance: the kit that proves a World keeps W1-W17.

Three tiers: Hypothesis state machines against a reference model, real OS
processes racing with crashes and cut connections checked by history checkers,
and deliberately broken worlds the kit must fail. See docs/conformance.md.
"""

from fxworld_conformance.report import CheckResult, Status
from fxworld_conformance.target import Target

__all__ = ["CheckResult", "Status", "Target"]
