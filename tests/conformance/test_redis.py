"""The whole kit against RedisWorld on real Redis: one server with every tier
(directed, stateful, and the process tier with SIGKILL, SIGSTOP, cut and stalled
connections and a crash-restart of redis-server from its AOF), then a local
three-master Redis Cluster with the same suite (its restart SIGKILLs every node)."""

from __future__ import annotations

import pytest

from fxworld_conformance import Target, WorldConformance
from fxworld_conformance.runner import run_check
from fxworld_conformance.suite import assert_results
from tests.support.redis_server import RedisCluster, RedisServer


def _assert_process_tier(target: Target, profile: str, seed: int) -> None:
    """Every row of the process tier ran (none skipped) and passed."""
    rows = run_check("processes", target, profile=profile, seed=seed)
    assert_results(rows)
    skipped = {r.name: r.detail for r in rows if r.status == "skipped"}
    assert not skipped, skipped
    main = next(r for r in rows if r.extra.get("mode"))
    assert main.extra["mode"] == "processes"
    faults = main.extra.get("faults", {})
    assert faults.get("kill", 0) + faults.get("stop", 0) >= 1, faults
    assert faults.get("cut", 0) >= 1, faults


class TestRedisWorld(WorldConformance):
    @pytest.fixture
    def fxworld_target(self, redis_server: RedisServer) -> Target:
        return Target(
            url=redis_server.url,
            restart=redis_server.acrash_restart,
            extra_capabilities=frozenset({"restartable"}),
        )

    @pytest.mark.fxworld_slow
    def test_processes(
        self, fxworld_target: Target, fxworld_profile: str, fxworld_seed: int
    ) -> None:
        _assert_process_tier(fxworld_target, fxworld_profile, fxworld_seed)


class TestRedisClusterWorld(WorldConformance):
    @pytest.fixture
    def fxworld_target(self, redis_cluster: RedisCluster) -> Target:
        return Target(
            url=redis_cluster.url,
            restart=redis_cluster.acrash_restart,
            extra_capabilities=frozenset({"restartable"}),
        )

    @pytest.mark.fxworld_slow
    def test_processes(
        self, fxworld_target: Target, fxworld_profile: str, fxworld_seed: int
    ) -> None:
        _assert_process_tier(fxworld_target, fxworld_profile, fxworld_seed)
