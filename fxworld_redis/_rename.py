"""Renaming an agent (``RedisWorld.rename_agent``, for ``fxworld.engine.owners.rename_agent``):
every session of agent ``old`` is given to ``new``, its pending wake moved from
``due:<old>`` to ``due:<new>`` with its due time or lease (W19). One script per session
(each touches one partition's slot), found by a ``SCAN`` of the namespace's session
HASHes on every primary: a one-off for an operator, run with no worker of either
name running."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from redis.asyncio import Redis, RedisCluster

from fxworld_redis._scripts import text

__all__ = ["rename_agent"]

Script = Callable[[str, Sequence[str], Sequence[str | bytes]], Awaitable[Any]]


async def rename_agent(
    client: Redis | RedisCluster, script: Script, namespace: str, old: str, new: str
) -> int:
    """Give every session of ``old`` to ``new``; how many moved."""
    moved = 0
    seen: set[str] = set()
    async for raw in client.scan_iter(match=f"fxworld:{{{namespace}:*}}:m:*", count=1000):
        meta = text(raw)
        if meta in seen:  # a SCAN may return a key twice
            continue
        seen.add(meta)
        prefix, _, sid = meta.partition("}:m:")
        keys = [meta, f"{prefix}}}:due", f"{prefix}}}:agents"]
        moved += int(await script("rename", keys, [sid, old, new]))
    return moved
