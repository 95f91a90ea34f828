"""Fixtures shared by the whole test suite."""

from __future__ import annotations

# A real PostgreSQL server (session-scoped) and fresh namespaces on it.
from tests.support.postgres_fixtures import (  # noqa: F401
    pg_url,
    pgbouncer,
    pgbouncer_url,
    postgres_server,
)

# Real Redis servers (a single one and a three-master Cluster, session-scoped).
from tests.support.redis_fixtures import redis_cluster, redis_server, redis_url  # noqa: F401

# A real S3 server (SeaweedFS weed mini, or MinIO in Docker) and fresh namespaces on it.
from tests.support.s3_fixtures import s3_server, s3_url  # noqa: F401

# FXWORLD_REQUIRE_ALL_BACKENDS=1: a test skipped by a fixture (a server that cannot
# start) is a failure. Slow files first, the kit's backend files dealt test by test
# (tests/support/scheduling.py).
pytest_plugins = ["tests.support.require_backends", "tests.support.scheduling"]
