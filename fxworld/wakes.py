"""Wakes in batches from any world, for any agent: :func:`take_wakes`.

A world with a native ``take_wakes`` (:class:`~fxworld.protocol.WakeBatcher`) is
asked for the batch; for any other world the batch is built from ``take_wake``,
so every world answers, with what the protocol promises for a batch (W11-W13 per
wake, each session at most once, W15 on ``limit``).

With ``agent=``, only that agent's wakes (W19): a world with the seam
(:class:`~fxworld.protocol.AgentRouter`) is asked with ``take_wakes_for``. A world
without it gets the fallback :func:`take_wakes_fallback` (docs/contract.md, "Agent
routing").

Importing this module loads neither the engine nor the embedded worlds.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from fxworld import validate
from fxworld.errors import LeaseLost
from fxworld.protocol import AgentRouter, WakeBatcher, World
from fxworld.types import Entry, WakeLease

__all__ = ["take_wakes", "take_wakes_fallback", "owner_in_log", "FALLBACK_SCAN"]

FALLBACK_SCAN = 100
"""The most other agents' wakes one fallback take holds while it looks past them
for its own (a world without the seam; see :func:`take_wakes_fallback`)."""

_MADE_BY = ("prompt", "forked")  # the engine's kinds that name an agent (docs/log-format.md)
_HEAD = 20
"""Entries read from a log's start to find its first prompt (after a ``forked`` or
a ``fence`` entry it is among the first few)."""


async def take_wakes(
    world: World, *, lease: float, limit: int = 10, agent: str | None = None
) -> list[WakeLease]:
    """Take up to ``limit`` due wakes from ``world``, each under its own lease of
    ``lease`` seconds; ``[]`` if none is due. Natively where the world can, else
    from ``take_wake``.

    ``agent``: only wakes of sessions that agent owns or nobody owns (W19), each
    lease carrying the owner (``WakeLease.agent``); ``None``: any wake. Bad
    ``lease``, ``limit`` or ``agent``: ``InvalidArgument`` before any I/O (W15)."""
    seconds = validate.lease(lease)
    count = validate.wake_batch(limit)
    if agent is not None:
        name = validate.agent_name(agent)
        if isinstance(world, AgentRouter):
            return await world.take_wakes_for(name, lease=seconds, limit=count)
        return await take_wakes_fallback(world, name, lease=seconds, limit=count)
    if isinstance(world, WakeBatcher):
        return await world.take_wakes(lease=seconds, limit=count)
    return await _one_by_one(world, lease=seconds, limit=count)


async def _one_by_one(world: World, *, lease: float, limit: int) -> list[WakeLease]:
    """The batch a world without a native one gets: ``take_wake`` up to ``limit``
    times, ending at the first ``None``. Each wake is leased by ``take_wake`` itself,
    so W11-W13 hold for each as they do for ``take_wake``.

    A session handed out a second time (its first lease in this batch expired while
    the batch was being taken: a lease shorter than the round trips) keeps only its
    newest lease, and the batch ends there: a batch holds each session once (W12).
    """
    batch: dict[str, WakeLease] = {}
    while len(batch) < limit:
        got = await world.take_wake(lease=lease)
        if got is None:
            break
        again = got.session_id in batch
        batch[got.session_id] = got
        if again:
            break
    return list(batch.values())


async def take_wakes_fallback(
    world: World, agent: str, *, lease: float, limit: int
) -> list[WakeLease]:
    """What ``take_wakes(world, agent=...)`` does on a world without the seam.

    Wakes are taken in batches (``take_wakes`` where the world has it, else one by
    one with ``take_wake``), and each session's owner is read
    from its log (:func:`owner_in_log`: the ``agent`` of its first prompt that
    names one; none: nobody's). A wake of the agent's own session, or of nobody's,
    is kept. A wake of another agent's session is held while the take looks past
    it (so its own wakes behind others' are found), at most :data:`FALLBACK_SCAN`
    of them, and then handed back: ``wake(delay=0)`` first, then ``finish_wake``,
    so by W13 it stays due at once for its own agent, and is never lost even if
    this process dies in between (its lease then ends and it is delivered again).

    What such a world does not get: an owner that is atomic with the first prompt
    (two agents racing to prompt one new session both append; the first prompt
    naming an agent wins, and the other agent's runners never run it) and the
    no-starvation promise beyond the scan (an agent's wake behind more than
    ``FALLBACK_SCAN`` due wakes of other agents waits until they are taken).
    """
    mine: dict[str, WakeLease] = {}
    others: list[WakeLease] = []
    try:
        while len(mine) < limit and len(others) < FALLBACK_SCAN:
            batch = await _some(world, lease=lease, limit=limit - len(mine))
            if not batch:
                break
            again = False
            for got in batch:
                owner = await owner_in_log(world, got.session_id)
                if owner is not None and owner != agent:
                    others.append(dataclasses.replace(got, agent=owner))
                    continue
                again = again or got.session_id in mine
                mine[got.session_id] = dataclasses.replace(got, agent=owner)
            if again:
                break
    finally:
        for w in others:
            await _hand_back(world, w)
    return list(mine.values())


async def _some(world: World, *, lease: float, limit: int) -> list[WakeLease]:
    """One look: a native batch where the world has one, else one ``take_wake``."""
    if isinstance(world, WakeBatcher):
        return await world.take_wakes(lease=lease, limit=limit)
    got = await world.take_wake(lease=lease)
    return [] if got is None else [got]


async def _hand_back(world: World, wake: WakeLease) -> None:
    """Give back a wake taken for another agent: due again at once, never lost (W13)."""
    await world.wake(wake.session_id, delay=0.0)
    with contextlib.suppress(LeaseLost):  # expired meanwhile: delivered again anyway
        await world.finish_wake(wake)


async def owner_in_log(world: World, session_id: str) -> str | None:
    """The agent a session's log names as its owner: the ``agent`` of the first
    ``prompt`` (or ``forked``) entry among its first entries that has one; ``None``
    if none does
    (a session written before agents were recorded, or with no prompt yet)."""
    head = await world.read(session_id, 0, limit=_HEAD)
    return first_agent(head)


def first_agent(entries: list[Entry]) -> str | None:
    """The ``agent`` of the first prompt (or fork) in ``entries`` that names one."""
    for e in entries:
        if e.kind in _MADE_BY:
            name: Any = e.data.get("agent")
            if isinstance(name, str) and name:
                return name
    return None
