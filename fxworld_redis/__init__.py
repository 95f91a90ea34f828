"""RedisWorld: the Redis backend of fxworld (``pip install 'fxworld[redis]'``).

URL: ``redis://[user:password@]host:port/db`` or ``rediss://`` (TLS), with
``?namespace=ns``, ``?cluster=true`` (Redis Cluster), ``?partitions=N``,
``?max_entry_bytes=N`` and ``?durable=true|false``; other query parameters go to
redis-py (``?max_connections=N``: the world's budget, ``connection_budget``,
default 8, per server and per node on a Cluster; calls wait for a free
connection). Or the application's own
``redis.asyncio.Redis`` / ``RedisCluster``, which ``close()`` leaves open::

    from fxworld import world
    from fxworld_redis import RedisWorld

    w = world(RedisWorld("redis://cache:6379/0", namespace="prod"))
    await w.setup()            # or: fxworld setup --world redis://cache:6379/0

Capabilities: ``shared``, ``push_follow``, and ``durable`` only when every primary
runs ``appendonly yes`` with ``appendfsync always`` (checked by ``setup()``; where
``CONFIG`` is disabled, the ``durable=`` argument decides). A server whose
``maxmemory-policy`` may evict keys (``allkeys-*``) is refused by ``setup()`` unless
the world is opened with ``durable=False``. See docs/redis.md.

How it keeps the contract (key layout and scripts in ``_scripts``):

* Every call is one Lua script run by ``EVALSHA``: one round trip, atomic. The
  scripts are loaded by ``setup()`` and loaded again by the world when the server
  lost them (restart, failover, ``SCRIPT FLUSH``).
* A session's keys and its partition's wake queue share one hash tag
  (``{ns:p}``), so on a Cluster each script touches one slot: append with its
  idempotency key, its fence check and its wake is one atomic step (W4, W6, W7).
* Due times and leases come from the server's clock (``TIME`` in the scripts).
* ``follow()`` is pushed: the followers of a partition share one blocking ``XREAD``
  over all their streams (``_follow``), so however many they are, they hold at most
  one connection per partition (on a Cluster, half the budget at most: ``_budget``);
  the world's calls keep the rest.
* ``list_sessions()`` pages through one sorted set of session ids per partition.
* Agent routing (``AgentRouter``, W19): the owner in the session's HASH, set once by
  ``claim``; a due queue per agent and partition beside the shared one, so a take
  for an agent visits only its own queues and the shared ones.
* ``drop_namespace()`` scans every primary for the namespace's keys and unlinks them
  (the optional ``NamespaceDropper``; the conformance kit removes its namespaces
  with it).
* Driver errors are translated in ``_errors``; calls the server refused unrun,
  and idempotent ones, are retried inside the world first.
"""

from __future__ import annotations

from fxworld_redis._world import RedisWorld

__all__ = ["RedisWorld"]
