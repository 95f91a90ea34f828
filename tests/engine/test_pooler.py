"""The engine's crash tests and an approvals test through a real PgBouncer in
transaction mode (``?pooler=transaction``, followers on a direct ``listen_url``), on
the world ``pgbouncer`` only (tests/engine/conftest.py, ``pgbouncer_url``): the tests
of test_crash.py and test_approvals_procs.py, the crash points one of each kind
(a crash between appends, inside a tool of each kind, mid-stream, during parallel
calls), so the suite's time stays in budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import test_crash
from test_approvals_procs import test_a_decision_from_another_process_while_no_worker_runs
from test_crash import test_crash_during_parallel_calls

__all__ = [
    "test_a_decision_from_another_process_while_no_worker_runs",
    "test_crash_during_parallel_calls",
    "test_crash_at_a_step_boundary",
]

pytestmark = [pytest.mark.timeout(120), pytest.mark.engine_worlds("pgbouncer")]


@pytest.mark.parametrize(
    "point", ["after-message", "in-tool:lookup", "in-tool:charge", "after-chunk#2"]
)
async def test_crash_at_a_step_boundary(
    point: str, engine_world_url: str, start_worker: Any, tmp_path: Path
) -> None:
    await test_crash.test_crash_at_step_boundary(point, engine_world_url, start_worker, tmp_path)
