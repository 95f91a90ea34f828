"""The whole kit against PostgresWorld on a real PostgreSQL server: the directed
checks of W1-W17, the stateful tier, and the process tier (racing OS processes with
SIGKILL and SIGSTOP, zombie writers, cut and stalled connections, a server
crash-restart). PostgreSQL can do all of it, so no row of the process tier may be
skipped here."""

from __future__ import annotations

import pytest

from fxworld_conformance import Target, WorldConformance
from fxworld_conformance.runner import run_check
from fxworld_conformance.suite import assert_results
from tests.support.postgres_server import PostgresServer


class TestPostgresWorld(WorldConformance):
    @pytest.fixture
    def fxworld_target(self, postgres_server: PostgresServer) -> Target:
        return Target(
            url=postgres_server.url,
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
        assert not skipped, skipped
        main = next(r for r in rows if r.extra.get("mode"))
        assert main.extra["mode"] == "processes"
        faults = main.extra.get("faults", {})
        assert faults.get("kill", 0) + faults.get("stop", 0) >= 1, faults
        assert faults.get("cut", 0) >= 1, faults
