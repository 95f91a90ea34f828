"""The whole kit against S3World on a real S3 server (SeaweedFS ``weed mini``, or
MinIO in Docker): the directed checks of W1-W17, the stateful tier, and the
process tier (racing OS processes with SIGKILL and SIGSTOP, cut and stalled
connections through the kit's proxy in front of the endpoint, a crash-restart of
the server on its data dir). No row of the process tier may be skipped here.

Every S3 request takes 10-30 ms on a loaded 2-core machine (PostgreSQL: 0.3 ms),
so the two state machines run at the kit's ``fast`` size (25 examples each)
unless ``FXWORLD_S3_KIT_PROFILE=ci`` asks for the full one; the directed checks
and the process tier run as the kit's profile says."""

from __future__ import annotations

import os

import pytest

from fxworld_conformance import Target, WorldConformance
from fxworld_conformance.runner import run_check
from fxworld_conformance.suite import assert_results
from tests.support.s3_server import S3Server


class TestS3World(WorldConformance):
    @pytest.fixture
    def fxworld_target(self, s3_server: S3Server) -> Target:
        return Target(
            url=s3_server.url(),
            restart=s3_server.acrash_restart,
            extra_capabilities=frozenset({"restartable"}),
        )

    @pytest.mark.fxworld_slow
    @pytest.mark.parametrize("machine", ["stateful log", "stateful wakes"])
    def test_machines(self, fxworld_target: Target, fxworld_seed: int, machine: str) -> None:
        profile = os.environ.get("FXWORLD_S3_KIT_PROFILE", "fast")
        assert_results(run_check(machine, fxworld_target, profile=profile, seed=fxworld_seed))

    test_stateful_log = None  # run by test_machines, at the size chosen above
    test_stateful_wakes = None

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
