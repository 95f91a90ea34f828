"""PostgresWorld: the PostgreSQL backend of fxworld (``pip install 'fxworld[postgres]'``).

URL: ``postgresql://user:password@host:port/db?namespace=ns`` (also ``postgres://``
and ``postgresql+asyncpg://``); optional ``max_entry_bytes=``, ``pool_size=``,
``follow_poll=``, ``pooler=transaction|session`` (behind PgBouncer, Supabase's or
Neon's pooler, RDS Proxy) and ``listen_url=`` (a direct URL for LISTEN; see
``_pooler``). One world opens at most ``connection_budget`` = ``pool_size`` + 3
connections.
Or the application's own SQLAlchemy ``AsyncEngine`` (asyncpg driver), which
``close()`` leaves open::

    from fxworld import world
    from fxworld_postgres import PostgresWorld

    w = world(PostgresWorld("postgresql://app@db/app", namespace="prod"))
    await w.setup()            # or: fxworld setup --world postgresql://app@db/app

Capabilities: ``durable``, ``shared``, ``push_follow``.

How it keeps the contract:

* Each namespace is a Postgres schema ``fxworld_<namespace>``, created and migrated
  by ``setup()`` (numbered, idempotent migrations under an advisory lock).
* append, acquire, take_wake, renew_wake, finish_wake, wake and delete are each one
  plpgsql function call: one round trip. The per-session position is allocated
  under the session row's lock in the same transaction that inserts the entries, so
  a reader never sees a hole filled later (W9). Entries are stored as ``jsonb``.
* ``follow()`` is pushed by LISTEN/NOTIFY on one listener connection per world,
  with polling as the fallback (W10). Appends notify only for sessions somebody
  follows, and not in their own commit: each world sends one NOTIFY for all its
  appends to followed sessions since the last one was sent, on a connection of its
  own, right after they commit (a NOTIFY in every commit serialises commits), and
  with ``synchronous_commit`` off (it carries no data). The followers of a world
  that one batch of notifications wakes read together: one statement for all their
  cursors (``_listen.Listener.read``).
* Wakes are rows keyed by session, taken with ``FOR UPDATE SKIP LOCKED`` on the
  server's clock; ``take_wakes(lease=, limit=)`` takes a batch.
* Driver errors are translated in ``_errors``: a lost connection is
  ``BackendUnavailable``; calls that never reached the server, and idempotent ones,
  are retried inside the world first.
* ``list_sessions()`` pages through sessions (the optional ``SessionLister``).
* ``drop_namespace()`` drops the schema with everything in it (the optional
  ``NamespaceDropper``; the conformance kit removes its namespaces with it).
"""

from __future__ import annotations

from fxworld_postgres._world import PostgresWorld

__all__ = ["PostgresWorld"]
