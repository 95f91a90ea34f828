"""EncryptedWorld keeps every guarantee W1-W17 of the world it wraps: the whole kit
on it over SQLite and over PostgreSQL. The process tier runs as concurrent tasks on
one world object (an EncryptedWorld has no URL: keys never come from one), which
still races appends, takeovers, wakes, creation of the sessions' data keys and
followers against each other."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from fxworld import EncryptedWorld, SqliteWorld
from fxworld_conformance import Target, WorldSuite
from fxworld_postgres import PostgresWorld
from tests.support.namespaces import fresh_namespace
from tests.support.postgres_server import PostgresServer

KEYS = {"new": os.urandom(32), "old": os.urandom(32)}


class TestEncryptedSqliteWorld(WorldSuite):
    @pytest.fixture
    def fxworld_target(self, tmp_path: Path) -> Target:
        def fresh() -> EncryptedWorld:
            return EncryptedWorld(SqliteWorld(tmp_path / f"{uuid.uuid4().hex}.db"), KEYS)

        return Target(factory=fresh)


class TestEncryptedPostgresWorld(WorldSuite):
    @pytest.fixture
    def fxworld_target(self, postgres_server: PostgresServer) -> Target:
        def fresh() -> EncryptedWorld:
            inner = PostgresWorld(postgres_server.url, namespace=fresh_namespace("enc"))
            return EncryptedWorld(inner, KEYS)

        return Target(factory=fresh)
