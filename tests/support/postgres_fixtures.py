"""pytest fixtures for a real PostgreSQL server (registered from tests/conftest.py).

``postgres_server``: one server for the whole test session (see
:mod:`tests.support.postgres_server`); if it cannot start, every test that needs it
fails with the reason: never skipped.
``pg_url``: the URL of a fresh, empty namespace on it (``?namespace=t_<random>``),
already set up, for tests whose worker processes open the world by URL.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest

from tests.support.namespaces import fresh_namespace, set_up
from tests.support.pgbouncer_server import PgBouncer, start_pgbouncer
from tests.support.postgres_server import PostgresServer, start_postgres

__all__ = ["postgres_server", "pg_url", "pgbouncer", "pgbouncer_url"]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> str:
    """A fresh, set-up namespace on the test server, as a ``postgresql://`` URL."""
    return set_up(f"{postgres_server.url}?namespace={fresh_namespace('e')}")


@pytest.fixture(scope="session")
def pgbouncer(postgres_server: PostgresServer) -> Iterator[PgBouncer]:
    """A real PgBouncer in transaction mode in front of ``postgres_server``."""
    bouncer = start_pgbouncer(postgres_server, "transaction")
    try:
        yield bouncer
    finally:
        bouncer.stop()


@pytest.fixture
def pgbouncer_url(pgbouncer: PgBouncer, postgres_server: PostgresServer) -> str:
    """A fresh, set-up namespace reached through PgBouncer in transaction mode, as a
    ``postgresql://`` URL with ``?pooler=transaction`` and a ``listen_url`` straight to
    the server (LISTEN needs a session)."""
    listen = quote(postgres_server.url, safe="")
    return set_up(
        f"{pgbouncer.url}?namespace={fresh_namespace('b')}&pooler=transaction&listen_url={listen}"
    )
