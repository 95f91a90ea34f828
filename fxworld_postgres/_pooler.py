"""PostgresWorld behind a connection pooler, and its connection budget.

``?pooler=transaction`` (PgBouncer's ``pool_mode = transaction``, Supabase's
transaction pooler, Neon's pooled endpoint, RDS Proxy): each transaction may run on
another server connection, so nothing may rely on a session:

* no prepared statement outlives its transaction: asyncpg runs without its
  statement cache (``statement_cache_size=0``: each statement is parsed again in the
  same message batch that binds and runs it) and SQLAlchemy's own cache is off, its
  statements (``setup()`` only) named uniquely inside their transaction;
* no ``SET``, no session advisory lock (migrations take a transaction-scoped one),
  no temporary table: every call of the world is one statement, its own transaction;
* no ``LISTEN``: followers listen on a direct connection given by ``?listen_url=``,
  or poll every ``follow_poll`` seconds (W10's bounded delay) when none is given;
  NOTIFY, which is transactional, goes through the pooler.

``?pooler=session`` (PgBouncer's ``pool_mode = session``, Supabase's session
pooler on port 5432): a client keeps its server connection, so the world runs as on
a direct connection; the mode only names the deployment.

The connection budget: one world opens at most
``pool_size`` connections for its calls, plus one for ``follow()``'s listener (only
once something follows), one for its notifier (only once an append to a followed
session lands; none through a transaction pooler, whose NOTIFYs go with the calls)
and one for ``setup()`` (only while it runs): :func:`budget`.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from fxworld.errors import ConfigurationError
from fxworld.urls import mask, unparseable

__all__ = ["MODES", "EXTRA_CONNECTIONS", "mode", "budget", "connect_args", "listen_dsn", "listen"]

MODES = ("transaction", "session")
"""The pooler modes a world takes (``?pooler=``); ``None`` is a direct connection."""

EXTRA_CONNECTIONS = 3
"""Connections beyond ``pool_size``: the listener, the notifier and ``setup()``."""


def mode(value: str | None, url: str) -> str | None:
    """The pooler mode named by ``value`` (``?pooler=``), checked."""
    if value is None or value in ("", "none", "direct"):
        return None
    if value not in MODES:
        raise ConfigurationError(
            f"pooler must be transaction or session (or none), not {value!r}, in {mask(url)}"
        )
    return value


def budget(pool_size: int) -> int:
    """The most server connections one world of ``pool_size`` opens at once."""
    return pool_size + EXTRA_CONNECTIONS


def connect_args(pooler: str | None) -> dict[str, Any]:
    """asyncpg's (and SQLAlchemy's asyncpg dialect's) connect arguments for ``pooler``.

    Each connection names the process in ``application_name`` (``fxworld-<pid>``), so
    ``pg_stat_activity`` shows which process holds which connection.
    """
    args: dict[str, Any] = {
        "timeout": 10,
        "command_timeout": 60,
        "server_settings": {"application_name": f"fxworld-{os.getpid()}"},
    }
    if pooler == "transaction":  # no prepared statement outlives its transaction
        args["statement_cache_size"] = 0
        args["prepared_statement_cache_size"] = 0
        args["prepared_statement_name_func"] = _unique_statement_name
    return args


def _unique_statement_name() -> str:
    """SQLAlchemy's statements (in ``setup()``'s transaction) get names no other
    client of the same server connection can have used."""
    return f"__fxworld_{uuid.uuid4().hex}__"


def listen_dsn(url: str) -> str:
    """The ``?listen_url=``: a direct ``postgresql://`` URL for LISTEN, checked."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as e:
        raise unparseable(url, e) from None
    if parsed.drivername not in ("postgresql", "postgres", "postgresql+asyncpg"):
        raise ConfigurationError(f"listen_url must be a postgresql:// URL, not {mask(url)}")
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


async def listen(dsn: str) -> asyncpg.Connection:
    """A direct session for LISTEN (a transaction pooler cannot keep one)."""
    return await asyncpg.connect(
        dsn, timeout=10, server_settings={"application_name": f"fxworld-{os.getpid()}"}
    )
