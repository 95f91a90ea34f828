"""The process tier (tier 2) on the embedded worlds.

SqliteWorld is ``shared``: real OS processes open the same file by URL (one
namespace), are SIGKILLed and SIGSTOPped at seeded moments, and the history
checkers judge everything they did. MemoryWorld is not: the same workload runs as
concurrent tasks in one process. Both must pass every check; the rows that cannot
apply are skipped with the reason.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fxworld_conformance.checkers import CHECKS
from fxworld_conformance.procs import ROW, run_process_checks
from fxworld_conformance.report import CheckResult
from fxworld_conformance.target import Target

SEED = 20261130


def failures(rows: list[CheckResult]) -> str:
    return "\n\n".join(f"{r.name}\n{r.detail}" for r in rows if r.status in ("failed", "error"))


def statuses(rows: list[CheckResult]) -> dict[str, str]:
    return {r.name.removeprefix(ROW): r.status for r in rows}


async def reopen_only() -> None:
    """An embedded world has no server: its "restart" is every process going away
    and a new connection opening the file, which the restart check does anyway."""


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL and SIGSTOP")
def test_process_tier_passes_on_sqlite_processes(tmp_path: Path) -> None:
    target = Target(
        url=f"sqlite:///{tmp_path}/world.db",
        restart=reopen_only,
        extra_capabilities=frozenset({"restartable"}),
    )
    rows = run_process_checks(target, profile="ci", seed=SEED)
    assert not failures(rows), failures(rows)
    status = statuses(rows)
    for check in CHECKS:
        assert status[check.name] == "passed", check.name
    assert status["every role made progress"] == "passed"
    assert status["acknowledged appends and pending wakes survive a restart"] == "passed"
    # A file is not reached over TCP: that is the one thing skipped, and it says so.
    skipped = [r for r in rows if r.status == "skipped"]
    assert [r.name.removeprefix(ROW) for r in skipped] == ["cut and stalled connections"]
    assert "TCP" in skipped[0].detail
    main = next(r for r in rows if r.name == ROW + "batches atomic")
    assert main.extra["mode"] == "processes"
    faults = main.extra["faults"]
    assert sum(faults.get(k, 0) for k in ("kill", "stop", "kill_inside", "stop_inside")) >= 3
    assert faults.get("kill_inside", 0) >= 1, faults  # a kill inside an append(wake=, key=)
    assert main.operations > 300


def test_process_tier_passes_on_memory_tasks() -> None:
    rows = run_process_checks(Target(url="memory://"), profile="ci", seed=SEED)
    assert not failures(rows), failures(rows)
    status = statuses(rows)
    for check in CHECKS:
        assert status[check.name] == "passed", check.name
    skipped = {r.name.removeprefix(ROW): r.detail for r in rows if r.status == "skipped"}
    assert "'shared'" in skipped["racing OS processes, SIGKILL and SIGSTOP"]
    assert "restartable" in skipped["acknowledged appends and pending wakes survive a restart"]
    assert "cut and stalled connections" in skipped
    main = next(r for r in rows if r.name == ROW + "batches atomic")
    assert main.extra["mode"] == "tasks"
    assert main.extra["faults"].get("kill", 0) + main.extra["faults"].get("kill_inside", 0) >= 1
