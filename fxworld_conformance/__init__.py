"""fxworld_conformance: the kit that proves a World keeps W1-W19.

Two names at the door:

- :class:`WorldSuite`, for pytest: subclass it, give it your world (override the
  ``fxworld_target`` fixture, or pass ``--fxworld-world=...``), run pytest. Every
  check is one test.
- :func:`run_kit`, for code and the CLI (``fxworld conformance --world
  URL|module:factory``): runs the kit and returns one :class:`CheckResult` per check.

Both run the same checks, from the same tables. Inside, a subpackage per tier, each
readable alone (see docs/conformance.md): ``guarantees/`` (the scenarios, one
module per group of guarantees, in one table), ``engine/`` (the turn engine's
context, typed answers and durable steps on the world), ``stateful/`` (Hypothesis state
machines beside the reference model in ``model.py``), ``procs/`` (real OS processes
racing, crashed and cut off), ``checkers/`` (the history checkers the process tier
ends with), ``broken/`` (worlds the kit must fail: its teeth). Beside them,
``capacity.py``: hundreds of idle followers must leave the world's other calls at
their usual speed.

Importing this package imports neither Hypothesis nor pytest: the pytest plugin
loads it in every pytest run. :class:`WorldSuite` and :func:`run_kit` load them on
first use.
"""

from typing import Any

from fxworld_conformance.report import CheckResult, Status
from fxworld_conformance.target import Target

__all__ = ["WorldSuite", "run_kit", "Target", "CheckResult", "Status"]


def __getattr__(name: str) -> Any:
    if name == "WorldSuite":
        from fxworld_conformance.suite import WorldSuite

        return WorldSuite
    if name == "run_kit":
        from fxworld_conformance.runner import run_kit

        return run_kit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
