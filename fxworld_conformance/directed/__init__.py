"""Directed checks: one short, explicit scenario per guarantee, on a fresh world each.

They run first and fast, give every guarantee its own row, and cover what the
state machines do not generate: bad input (W15), the error hierarchy and
credentials (W16), declared capabilities (W17), JSON round trips, big batches,
many concurrent writers on one session. Each raises
:class:`~fxworld_conformance.model.Violation` naming the guarantee it proves
broken.

The checks live by concern in :mod:`~fxworld_conformance.directed.log` (W1-W10),
:mod:`~fxworld_conformance.directed.wakes` (W11-W14) and
:mod:`~fxworld_conformance.directed.errors` (W15-W17), all working through the
:class:`~fxworld_conformance.directed.probe.Probe`; this module holds their table
and runs one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fxworld_conformance.directed.errors import w15_bad_input, w16_errors, w17_capabilities
from fxworld_conformance.directed.log import (
    w1_acquire,
    w2_fenced_append,
    w3_unfenced,
    w4_atomic,
    w5_expect,
    w6_key,
    w7_append_wake,
    w8_epochs,
    w9_read,
    w10_follow,
    w10_follow_cancel,
)
from fxworld_conformance.directed.probe import Probe
from fxworld_conformance.directed.wakes import (
    w11_coalesce,
    w12_lease,
    w12_take_wakes,
    w13_finish,
    w14_delete,
)
from fxworld_conformance.target import CALL_TIMEOUT, Target

__all__ = ["DIRECTED", "Directed", "Probe", "run_directed"]


@dataclass(frozen=True)
class Directed:
    """One directed check: ``id`` names its pytest test (``w02-fenced-append``),
    ``name`` its row in the kit's report."""

    id: str
    name: str
    guarantees: tuple[str, ...]
    run: Callable[[Probe, Target], Awaitable[None]]


DIRECTED: list[Directed] = [
    Directed(
        "w01-acquire", "W1 acquire: epochs grow, fence entries, reserved kinds", ("W1",), w1_acquire
    ),
    Directed(
        "w02-fenced-append",
        "W2 fenced append: a replaced writer stays refused",
        ("W2",),
        w2_fenced_append,
    ),
    Directed("w03-unfenced-append", "W3 unfenced append between fenced ones", ("W3",), w3_unfenced),
    Directed(
        "w04-atomic-dense-ordered",
        "W4 atomic dense batches, JSON round trip, 16 racing writers",
        ("W4",),
        w4_atomic,
    ),
    Directed("w05-expect", "W5 expect and Conflict.last", ("W5",), w5_expect),
    Directed(
        "w06-idempotency-key", "W6 idempotency keys, stale fence, racing retries", ("W6",), w6_key
    ),
    Directed(
        "w07-append-wake-is-atomic",
        "W7 append + wake, no wake for a refused append",
        ("W7",),
        w7_append_wake,
    ),
    Directed(
        "w08-epoch-monotone-log", "W8 epochs never decrease along the log", ("W8",), w8_epochs
    ),
    Directed("w09-read", "W9 paged reads, readers racing writers", ("W9",), w9_read),
    Directed("w10-follow", "W10 follow, new entries, reconnect", ("W10",), w10_follow),
    Directed(
        "w10-follow-cancelled",
        "W10 follow stops when its consumer is cancelled",
        ("W10",),
        w10_follow_cancel,
    ),
    Directed("w11-wake-coalescing", "W11 wake coalescing and due times", ("W11",), w11_coalesce),
    Directed("w12-lease", "W12 leases, expiry, redelivery, LeaseLost", ("W12",), w12_lease),
    Directed(
        "w12-take-wakes",
        "W11-W13 per wake of a batch (take_wakes), each session once, bad limits",
        ("W12", "W11", "W13", "W15"),
        w12_take_wakes,
    ),
    Directed("w13-finish", "W13 finish keeps a re-wake", ("W13",), w13_finish),
    Directed("w14-delete", "W14 delete: log, keys, wake, old fences", ("W14",), w14_delete),
    Directed("w15-bad-input", "W15 bad input refused before any write", ("W15",), w15_bad_input),
    Directed("w16-errors", "W16 error hierarchy and credentials", ("W16",), w16_errors),
    Directed("w17-capabilities", "W17 capabilities declared", ("W17",), w17_capabilities),
]


async def run_directed(
    d: Directed,
    target: Target,
    counter: list[int] | None = None,
    notes: dict[str, Any] | None = None,
) -> tuple[int, float]:
    """Run one directed check on a fresh world; return (operations, seconds).
    ``counter[0]`` gets the operation count and ``notes`` the figures the check
    left (:attr:`Probe.notes`), even when the check fails."""
    started = time.monotonic()
    world = await asyncio.wait_for(target.open(), CALL_TIMEOUT)
    p = Probe(world, d.guarantees[0])
    try:
        await d.run(p, target)
    finally:
        if counter is not None:
            counter[:] = [p.operations]
        if notes is not None:
            notes.update(p.notes)
        try:
            await asyncio.wait_for(world.close(), CALL_TIMEOUT)
        except Exception:
            pass
    return p.operations, time.monotonic() - started
