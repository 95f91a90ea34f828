"""pytest fixtures for real Redis servers (registered from tests/conftest.py).

``redis_server``: one server for the whole test session (AOF, ``appendfsync
always``; see :mod:`tests.support.redis_server`); ``redis_cluster``: one local
three-master Cluster for the session. If either cannot start, every test that
needs it fails with the reason: never skipped.
``redis_url``: the URL of a fresh, empty namespace on ``redis_server``, already
set up, for tests whose worker processes open the world by URL.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.namespaces import fresh_namespace, set_up
from tests.support.redis_server import RedisCluster, RedisServer, start_cluster, start_redis

__all__ = ["redis_server", "redis_cluster", "redis_url"]


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = start_redis()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """A fresh, set-up namespace on the test server, as a ``redis://`` URL."""
    return set_up(f"{redis_server.url}?namespace={fresh_namespace('e')}")
