"""fxworld_conformance: the kit that proves a World keeps W1-W17.

Three tiers: directed checks and Hypothesis state machines against a reference
model; real OS processes racing with crashes and cut connections, checked by
history checkers; and deliberately broken worlds the kit must fail. Beside them,
the capacity check (:mod:`fxworld_conformance.capacity`): hundreds of idle
followers must leave the world's other calls at their usual speed. Run it from
pytest (subclass :class:`WorldConformance`, or ``--fxworld-world=...``) or from
the command line (``fxworld conformance --world URL|module:factory``).
:class:`WorldSuite` adds the example tests of every guarantee
(:mod:`fxworld_conformance.examples`). See docs/conformance.md.

Importing this package imports neither Hypothesis nor pytest: the pytest plugin
loads it in every pytest run. :class:`WorldConformance` and :func:`run_kit` load
them on first use.
"""

from typing import Any

from fxworld_conformance.report import CheckResult, Status
from fxworld_conformance.target import Target

__all__ = ["CheckResult", "Status", "Target", "WorldConformance", "WorldSuite", "run_kit"]


def __getattr__(name: str) -> Any:
    if name == "WorldConformance":
        from fxworld_conformance.suite import WorldConformance

        return WorldConformance
    if name == "WorldSuite":
        from fxworld_conformance.suite import WorldSuite

        return WorldSuite
    if name == "run_kit":
        from fxworld_conformance.runner import run_kit

        return run_kit
    raise AttributeError(f"module 'fxworld_conformance' has no attribute {name!r}")
