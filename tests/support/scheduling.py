"""How the suite's tests are dealt to pytest-xdist's processes (``scripts/test`` runs
``--dist loadfile --no-loadscope-reorder``). Registered from ``tests/conftest.py``.

* Every test file is one unit of work (its module fixtures start once), as
  ``--dist loadfile`` does, except the files in :data:`SPLIT`, whose tests go one by
  one to whichever process is free: they use only the session's servers, which every
  process starts anyway, and hold tests of a minute or more (the kit's state
  machines and process tier, the integrations' process tests) that would otherwise
  run one after another.
* The files in :data:`SLOW_FIRST` are dealt first, in that order: a file of a few
  minutes that started near the end would hold the run's tail alone while the other
  processes idle. The rest keep pytest's order.

Without xdist (``FXWORLD_TEST_WORKERS=0``) only the order changes.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["SLOW_FIRST", "SPLIT"]

SPLIT = frozenset(
    {
        "tests/backends/test_encrypted.py",
        "tests/backends/test_memory.py",
        "tests/backends/test_postgres.py",
        "tests/backends/test_postgres_pooler.py",
        "tests/backends/test_redis.py",
        "tests/backends/test_s3.py",
        "tests/backends/test_sqlite.py",
        "tests/engine/test_approvals_procs.py",
        "tests/engine/test_agent_routing.py",
        "tests/fleet/test_two_agents.py",
        "tests/engine/test_large_crash.py",
        "tests/integrations/test_langgraph_conformance.py",
        "tests/integrations/test_langgraph_processes.py",
        "tests/integrations/test_langgraph_values.py",
        "tests/integrations/test_openai_agents_session.py",
    }
)
"""Files whose tests are dealt one by one, not as one unit: each test needs only
function fixtures and the session's servers."""

SLOW_FIRST = (
    # one unit each, a few minutes under load
    "tests/serverless/test_scenarios.py",
    "tests/serverless/test_two_agents_push.py",
    "tests/docs/test_run_locally.py",
    "tests/release/test_release.py",
    "tests/web/test_inspector_turns.py",
    "tests/web/test_browser_session_page.py",
    "tests/web/test_browser_sessions_list.py",
    "tests/conformance/test_broken.py",
    "tests/fleet/test_connections.py",
    "tests/engine/test_crash.py",
    # dealt test by test, the files with the most minutes first
    "tests/integrations/test_langgraph_processes.py",
    "tests/engine/test_large_crash.py",  # 14 tests of 15-60 s each under load
    "tests/integrations/test_langgraph_values.py",  # a 32 MiB state on five worlds
    "tests/backends/test_s3.py",
    "tests/fleet/test_two_agents.py",
    "tests/engine/test_approvals_procs.py",
    "tests/backends/test_postgres.py",
    "tests/integrations/test_langgraph_conformance.py",
    "tests/backends/test_redis.py",
    "tests/backends/test_encrypted.py",
    "tests/integrations/test_openai_agents_session.py",
    "tests/backends/test_postgres_pooler.py",
    "tests/backends/test_memory.py",
    "tests/fleet/test_rolling_deploy.py",
    "tests/fleet/test_starvation.py",
    "tests/engine/test_agent_routing.py",
)
"""Files dealt before all others, in this order (from a ``--durations=80`` run of the
whole suite: the slowest units first)."""


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(_file(item.nodeid), len(SLOW_FIRST)))  # stable


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadfile``: files as units, but :data:`SPLIT`'s tests one by one."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return nodeid if _file(nodeid) in SPLIT else _file(nodeid)

    return Scheduling(config, log)
