"""EncryptedWorld keeps every guarantee W1-W19 of the world it wraps: the whole kit
on it over SQLite and over PostgreSQL, the process tier included (the test scheme
``encrypted+<URL>`` of tests/support/encrypted.py: child processes open the same
EncryptedWorld, keys from the environment), so racing OS processes, SIGKILL and
SIGSTOP inside appends, racing creation of data keys and, on PostgreSQL, cut
connections and a server crash-restart."""

from __future__ import annotations

import pytest

from fxworld_conformance import Target, WorldSuite
from fxworld_conformance.runner import run_check
from fxworld_conformance.suite import assert_results
from tests.support.encrypted import PREFIX, encrypted_schemes  # noqa: F401
from tests.support.postgres_server import PostgresServer


@pytest.mark.usefixtures("encrypted_schemes")
class TestEncryptedSqliteWorld(WorldSuite):
    @pytest.fixture
    def fxworld_target(self, tmp_path: object) -> Target:
        return Target(url=f"{PREFIX}sqlite:///{tmp_path}/world.db")

    @pytest.mark.fxworld_slow
    def test_processes(
        self, fxworld_target: Target, fxworld_profile: str, fxworld_seed: int
    ) -> None:
        rows = run_check("processes", fxworld_target, profile=fxworld_profile, seed=fxworld_seed)
        assert_results(rows)
        main = next(r for r in rows if r.extra.get("mode"))
        assert main.extra["mode"] == "processes"  # real OS processes, not tasks


@pytest.mark.usefixtures("encrypted_schemes")
class TestEncryptedPostgresWorld(WorldSuite):
    @pytest.fixture
    def fxworld_target(self, postgres_server: PostgresServer) -> Target:
        return Target(
            url=PREFIX + postgres_server.url,
            restart=postgres_server.acrash_restart,
            extra_capabilities=frozenset({"restartable"}),
        )

    @pytest.mark.fxworld_slow
    def test_processes(
        self, fxworld_target: Target, fxworld_profile: str, fxworld_seed: int
    ) -> None:
        rows = run_check("processes", fxworld_target, profile=fxworld_profile, seed=fxworld_seed)
        assert_results(rows)
        skipped = {r.name: r.detail for r in rows if r.status == "skipped"}
        assert not skipped, skipped  # processes, cut connections and the restart all ran
