"""The engine's crash tests and an approvals test through a real PgBouncer in
transaction mode (``?pooler=transaction``, followers on a direct ``listen_url``):
the same tests as on a direct connection, imported from their modules, run here on
the world ``pgbouncer`` only (tests/engine/conftest.py, ``pgbouncer_url``)."""

from __future__ import annotations

from test_approvals_procs import test_a_decision_from_another_process_while_no_worker_runs
from test_crash import test_crash_at_step_boundary, test_crash_during_parallel_calls

ENGINE_WORLD_NAMES = ["pgbouncer"]

__all__ = [
    "test_a_decision_from_another_process_while_no_worker_runs",
    "test_crash_at_step_boundary",
    "test_crash_during_parallel_calls",
]
