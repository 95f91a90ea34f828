"""``fxworld conformance --restart-cmd CMD`` proves durability across a server
crash without any Python: the command crash-restarts a real PostgreSQL server
(``pg_ctl stop -m immediate``, then start and wait), and the restart checks run."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from fxworld.cli import main
from fxworld_conformance.procs import RESTART_ROW
from tests.support.postgres_server import LocalPostgres, PostgresServer


def restart_command(server: PostgresServer) -> str:
    assert isinstance(server, LocalPostgres), "this test drives a local cluster by pg_ctl"
    # as the cluster's owner, as the fixture runs it (pg_ctl refuses to run as root)
    pg_ctl = shlex.join([*server._as, str(server.bin / "pg_ctl")])
    data = shlex.quote(str(server.data))
    start = (
        f"{pg_ctl} start -D {data} -l {shlex.quote(str(server.log))} -w -t 120"
        f" -o {shlex.quote(server._options())}"
    )
    return f"{pg_ctl} stop -D {data} -m immediate && {start} >/dev/null"


def test_restart_cmd_enables_the_restart_checks(
    postgres_server: PostgresServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "out.json"
    argv = ["conformance", "--world", postgres_server.url, "--tiers", "processes"]
    argv += ["--profile", "quick", "--report", str(report), "-q"]
    rc = main([*argv, "--restart-cmd", restart_command(postgres_server)])
    out = capsys.readouterr().out
    assert rc == 0, out
    rows = {r["name"]: r for r in json.loads(report.read_text())["results"]}
    assert rows[RESTART_ROW]["status"] == "passed", rows[RESTART_ROW]
    faults = next(r for r in rows.values() if r["extra"].get("faults"))["extra"]["faults"]
    assert faults.get("restart") == 1, faults  # the workload's own crash-restart
    assert "restartable" in out


def test_a_restart_cmd_that_fails_is_a_kit_error(
    postgres_server: PostgresServer, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["conformance", "--world", postgres_server.url, "--tiers", "processes"]
    rc = main([*argv, "--profile", "quick", "-q", "--restart-cmd", "echo no such server; exit 3"])
    out = capsys.readouterr().out
    assert rc == 2, out
    assert "KIT ERROR" in out and "exited with 3" in out and "no such server" in out
    assert "FAILED" not in out
