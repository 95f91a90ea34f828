"""One check's row: what the directed and engine tiers' scenarios (and the capacity
check) did, as a :class:`~fxworld_conformance.report.CheckResult`.

A violation names its guarantee; a failed ``assert`` or wait breaks the scenario's
own guarantee (an engine scenario's: the engine row); an exception of the world
that is not an fxworld error breaks W16; an error raised in the kit's own code is
a kit error, a verdict on no guarantee.
"""

from __future__ import annotations

import asyncio
import os
import time
import traceback
from typing import TYPE_CHECKING, Any

from fxworld_conformance.bounds import watched
from fxworld_conformance.guarantees import Scenario, Skip, run_scenario
from fxworld_conformance.model import Violation
from fxworld_conformance.report import ENGINE, CheckResult, kit_error
from fxworld_conformance.target import Target

if TYPE_CHECKING:  # the engine tier loads the engine: only when it runs
    from fxworld_conformance.engine import EngineScenario

__all__ = ["run_one", "run_engine_one", "raised_by_kit"]


def run_one(d: Scenario, target: Target) -> CheckResult:
    """The row of one scenario: passed; skipped with its reason; failed with the
    guarantee a violation names (a bare failed ``assert`` in the scenario breaks
    the scenario's own); an error of the kit's own code is a kit error."""
    started = time.monotonic()
    counter = [0]
    notes: dict[str, Any] = {}
    try:
        ops, seconds = asyncio.run(watched(run_scenario(d, target, counter, notes)))
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
            detail=f"{type(e).__name__}: {e}\n" + traceback.format_exc(limit=7),
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
        asyncio.run(watched(run_engine_scenario(s, target)))
    except Exception as e:
        own = isinstance(e, (AssertionError, TimeoutError))
        if raised_by_kit(e) and not own:
            return kit_error(s.name, e, time.monotonic() - started)
        told = str(e) if isinstance(e, AssertionError) and str(e) else f"{type(e).__name__}: {e}"
        return CheckResult(
            name=s.name,
            guarantees=(ENGINE,),
            status="failed",
            detail=f"{told}\n" + traceback.format_exc(limit=9),
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
