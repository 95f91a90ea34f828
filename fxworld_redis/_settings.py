"""What ``setup()`` asks every primary about the promises it can keep (W17).

* :func:`fsyncs`: ``appendonly yes`` with ``appendfsync always`` (``CONFIG GET``),
  so an acknowledged write survives a crash: the capability ``durable``.
* :func:`evicting`: the ``maxmemory-policy`` (``INFO memory``, which managed
  services that hide ``CONFIG`` still answer). The world sets no TTL on its keys,
  so ``noeviction`` and the ``volatile-*`` policies never evict them; ``allkeys-*``
  may, silently, once memory runs out: a session's log reads ``[]``, its next
  acquire gets epoch 1 again, a stale fence's append lands (W1, W2, W8) and a keyed
  prompt lands twice (W6). Such a server is refused unless the world is opened with
  ``durable=False``.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis, RedisCluster

from fxworld.errors import ConfigurationError
from fxworld_redis import _errors
from fxworld_redis._scripts import text

__all__ = ["fsyncs", "evicting", "eviction_refused", "KEEPS_KEYS", "LARGEST_ENTRY"]

LARGEST_ENTRY = 512 * 1024 * 1024
"""The largest ``max_entry_bytes``: an entry's data is one argument of the append's
script, and Redis takes none over ``proto-max-bulk-len`` (512 MB by default)."""

KEEPS_KEYS = ("noeviction", "volatile-")
"""Eviction policies (or prefixes) that never evict a key without a TTL."""


async def fsyncs(client: Redis | RedisCluster) -> bool | None:
    """Whether every primary fsyncs each write; None where ``CONFIG`` is disabled."""
    try:
        replies = [await client.config_get("append*", **on) for on in await _primaries(client)]
    except Exception as e:
        if _errors.config_disabled(e):
            return None
        raise
    return all(_fsyncs(r) for r in replies)


async def evicting(client: Redis | RedisCluster) -> str | None:
    """The ``maxmemory-policy`` of the first primary that may evict the world's keys;
    None if none may (or no primary answers ``INFO``)."""
    for on in await _primaries(client):
        try:
            info = await client.info("memory", **on)
        except Exception as e:
            if _errors.config_disabled(e):
                return None
            raise
        policy = text(dict(info).get("maxmemory_policy", "noeviction"))
        if not policy.startswith(KEEPS_KEYS):
            return policy
    return None


def eviction_refused(policy: str) -> ConfigurationError:
    return ConfigurationError(
        f"the Redis server runs maxmemory-policy {policy}: once its memory is full it "
        "evicts keys, fxworld's too, and a session's log, fences and idempotency keys "
        "would vanish without an error. Set maxmemory-policy noeviction (in redis.conf, "
        "or CONFIG SET maxmemory-policy noeviction), or a volatile-* policy, or open "
        "the world with durable=False (?durable=false) to accept such a server"
    )


async def _primaries(client: Redis | RedisCluster) -> list[dict[str, Any]]:
    """Keyword arguments that send one command to each primary (a Cluster client
    learns its nodes first: before that it knows none, and every check would pass)."""
    if isinstance(client, RedisCluster):
        await client.initialize()
        return [{"target_nodes": node} for node in client.get_primaries()]
    return [{}]


def _fsyncs(reply: Any) -> bool:
    values = {text(k): text(v) for k, v in dict(reply).items()}
    return values.get("appendonly") == "yes" and values.get("appendfsync") == "always"
