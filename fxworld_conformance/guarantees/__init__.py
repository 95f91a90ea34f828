"""The kit's scenarios: each a short, explicit program of one guarantee on a fresh
world, written once and run by both doors (``run_kit`` and the CLI: the
``directed`` tier; ``WorldSuite``: ``test_directed[<id>]``).

They cover what the state machines do not generate: bad input (W15), the error
hierarchy and credentials (W16), declared capabilities (W17), JSON round trips,
big batches, many concurrent writers on one session, due times and lease expiry.
A scenario raises :class:`~fxworld_conformance.model.Violation` naming the
guarantee it proves broken; a bare ``assert`` that fails breaks the scenario's
own guarantee.

One module per group, each registering its scenarios in a
:class:`~fxworld_conformance.guarantees.scenario.Group`: ``log.py`` (W1-W9),
``follow.py`` (W10), ``wakes.py`` (W7, W11-W13, batches of wakes),
``wake_states.py`` (the optional ``WakeLister``), ``delete.py`` (W14, listing),
``prune.py`` (the optional ``last_entry`` and ``delete_if_idle``), ``input.py``
(W15), ``errors.py`` (W16, W17), ``large.py`` (W18, large values), ``agents.py`` (W19,
agent routing, for a world with the optional ``AgentRouter``); all work through the
:class:`~fxworld_conformance.guarantees.probe.Probe`. This module holds the one
table, :data:`SCENARIOS`, and runs one scenario.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fxworld_conformance.guarantees import (
    agents,
    delete,
    errors,
    follow,
    input,
    large,
    log,
    prune,
    wake_states,
    wakes,
)
from fxworld_conformance.guarantees.probe import Probe, Skip
from fxworld_conformance.guarantees.scenario import Scenario
from fxworld_conformance.target import CALL_TIMEOUT, Target, with_namespace

__all__ = ["SCENARIOS", "Scenario", "Probe", "Skip", "run_scenario", "missing"]

SCENARIOS: list[Scenario] = sorted(
    [
        *log.SCENARIOS,
        *follow.SCENARIOS,
        *wakes.SCENARIOS,
        *wake_states.SCENARIOS,
        *delete.SCENARIOS,
        *prune.SCENARIOS,
        *input.SCENARIOS,
        *errors.SCENARIOS,
        *large.SCENARIOS,
        *agents.SCENARIOS,
    ],
    key=lambda s: int(s.guarantees[0][1:]),
)
"""Every scenario, by W-number: the one table both doors of the kit run."""


def missing(s: Scenario, world: object, capabilities: frozenset[str]) -> list[str]:
    """What ``s`` needs that ``world`` lacks (an optional protocol it does not
    implement, a capability neither it nor the fixture declares)."""
    out = []
    for need in s.needs:
        if isinstance(need, str):
            if need not in capabilities:
                out.append(f"the capability {need!r}")
        elif not isinstance(world, need):
            out.append(f"the optional {need.__module__}.{need.__name__}")
    return out


async def run_scenario(
    s: Scenario,
    target: Target,
    counter: list[int] | None = None,
    notes: dict[str, Any] | None = None,
) -> tuple[int, float]:
    """Run one scenario on a fresh world; return (operations, seconds).
    ``counter[0]`` gets the operation count and ``notes`` the figures the
    scenario left (:attr:`Probe.notes`), even when it fails."""
    started = time.monotonic()
    namespace = target.fresh_namespace() if target.url else None
    world = await asyncio.wait_for(target.open(namespace), CALL_TIMEOUT)
    p = Probe(world, s.guarantees[0], target)
    if target.url and namespace is not None:
        p.url = with_namespace(target.url, namespace)
    try:
        caps = frozenset(getattr(world, "capabilities", ())) | target.extra_capabilities
        if target.restart is not None:
            caps |= {"restartable"}
        if lacks := missing(s, world, caps):
            raise Skip(f"the world lacks {' and '.join(lacks)}")
        await s.run(p)
    finally:
        if counter is not None:
            counter[:] = [p.operations]
        if notes is not None:
            notes.update(p.notes)
        await target.close(world)
    return p.operations, time.monotonic() - started
