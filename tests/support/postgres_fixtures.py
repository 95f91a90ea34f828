"""pytest fixtures for a real PostgreSQL server (registered from tests/conftest.py).

``postgres_server``: one server for the whole test session (see
:mod:`tests.support.postgres_server`); if it cannot start, every test that needs it
fails with the reason: never skipped.
``pg_url``: the URL of a fresh, empty namespace on it (``?namespace=t_<random>``),
already set up, for tests whose worker processes open the world by URL.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.namespaces import fresh_namespace, set_up
from tests.support.postgres_server import PostgresServer, start_postgres

__all__ = ["postgres_server", "pg_url"]


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
