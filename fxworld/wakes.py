"""Wakes in batches from any world: :func:`take_wakes`.

A world with a native ``take_wakes`` (:class:`~fxworld.protocol.WakeBatcher`) is
asked for the batch; for any other world the batch is built from ``take_wake``,
so every world answers, with what the protocol promises for a batch (W11-W13 per
wake, each session at most once, W15 on ``limit``).

Importing this module loads neither the engine nor the embedded worlds.
"""

from __future__ import annotations

from fxworld import validate
from fxworld.protocol import WakeBatcher, World
from fxworld.types import WakeLease

__all__ = ["take_wakes"]


async def take_wakes(world: World, *, lease: float, limit: int = 10) -> list[WakeLease]:
    """Take up to ``limit`` due wakes from ``world``, each under its own lease of
    ``lease`` seconds; ``[]`` if none is due. Natively where the world can, else
    from ``take_wake``. Bad ``lease`` or ``limit``:
    ``InvalidArgument`` before any I/O (W15)."""
    seconds = validate.lease(lease)
    count = validate.wake_batch(limit)
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
