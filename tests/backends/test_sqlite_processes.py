"""SqliteWorld under real OS processes sharing one file, one of them SIGKILLed.

Four processes take over one session again and again and append fenced batches
while a fifth appends prompts; one writer is killed mid-run. The final log must
have dense positions, no duplicate, every acknowledged append, no refused append,
every batch whole, epochs monotone, and each fenced entry written under the
newest fence at its position (W1, W2, W3, W4, W8, W9). A second check kills a
process while it appends large batches with ``wake=0``: no torn batch, no lost
wake, no wake without its entries (W4, W7).
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from fxworld import Entry, SqliteWorld
from tests.backends.sqlite_procs import SHARED, WAKE_BATCH

ROOT = Path(__file__).resolve().parents[2]


async def all_entries(world: SqliteWorld, sid: str) -> list[Entry]:
    out: list[Entry] = []
    while batch := await world.read(sid, out[-1].seq if out else 0):
        out.extend(batch)
    return out


pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")


def spawn(role: str, db: Path, name: str, seconds: float, record: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.backends.sqlite_procs",
            role,
            str(db),
            name,
            str(seconds),
            str(record),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    # A SIGKILL cannot cut a line (one write(2) each), but be strict anyway.
    return [json.loads(line) for line in lines if line.endswith("}")]


def wait_for_records(path: Path, op: str, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while sum(r["op"] == op for r in records(path)) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name}: fewer than {count} {op!r} records in {timeout}s")
        time.sleep(0.02)


class History:
    """Outcomes per operation id, from every process's record file."""

    def __init__(self, files: list[Path]) -> None:
        self.tried: dict[str, dict[str, Any]] = {}
        self.ok: dict[str, int] = {}
        self.refused: set[str] = set()
        self.acquired: list[int] = []
        for path in files:
            for r in records(path):
                if r["op"] == "try":
                    self.tried[r["id"]] = r
                elif r["op"] == "ok":
                    self.ok[r["id"]] = r["seq"]
                elif r["op"] == "fenced":
                    self.refused.add(r["id"])
                elif r["op"] == "acquire":
                    self.acquired.append(r["epoch"])

    @property
    def indeterminate(self) -> set[str]:
        return set(self.tried) - set(self.ok) - self.refused


def check_batches(log: list[Entry], history: History) -> dict[str, list[Entry]]:
    """Dense positions, no duplicate, no phantom, acknowledged appends whole at the
    seq returned, refused appends absent, indeterminate ones whole or absent."""
    assert [x.seq for x in log] == list(range(1, len(log) + 1)), "positions are not dense"
    by_id: dict[str, list[Entry]] = defaultdict(list)
    for x in log:
        if x.kind != "fence":
            by_id[x.data["id"]].append(x)
    for op_id, got in by_id.items():
        assert op_id in history.tried, f"{op_id} landed but was never tried"
        size = history.tried[op_id]["size"]
        assert [x.data["i"] for x in got] == list(range(size)), f"{op_id}: torn or duplicated"
        assert [x.seq for x in got] == list(range(got[0].seq, got[0].seq + size)), (
            f"{op_id}: batch interleaved with another"
        )
    for op_id, seq in history.ok.items():
        assert op_id in by_id, f"acknowledged {op_id} was lost"
        assert by_id[op_id][-1].seq == seq, f"{op_id}: acknowledged seq {seq} moved"
    for op_id in history.refused:
        assert op_id not in by_id, f"refused {op_id} landed"
    return by_id


async def test_four_writers_take_over_one_session_while_one_is_killed(tmp_path: Path) -> None:
    db = tmp_path / "world.db"
    world = SqliteWorld(db)
    await world.setup()  # the schema exists before the race starts
    files = [tmp_path / f"w{i}.jsonl" for i in range(4)] + [tmp_path / "prompts.jsonl"]
    seconds = 2.5
    # Writer 0 would run for a minute: it is killed long before, whatever the load.
    procs = [spawn("fenced", db, f"w{i}", 60 if i == 0 else seconds, files[i]) for i in range(4)]
    procs.append(spawn("prompts", db, "p", seconds, files[4]))
    try:
        # Kill writer 0 once it is well into the race.
        await asyncio.to_thread(wait_for_records, files[0], "ok", 5)
        await asyncio.sleep(random.uniform(0.0, 0.3))
        procs[0].send_signal(signal.SIGKILL)
        for proc in procs[1:]:
            _, err = await asyncio.to_thread(proc.communicate, timeout=120)
            assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
        await asyncio.to_thread(procs[0].wait, timeout=30)
        assert procs[0].returncode == -signal.SIGKILL
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    history = History(files)
    log = await all_entries(world, SHARED)
    by_id = check_batches(log, history)

    # Epochs: fence entries strictly grow; fenced entries never go back (W8); each
    # fenced entry was written under the newest fence at its position (W2); every
    # acknowledged fenced append carries the epoch of the fence it used.
    fence_epochs = [x.epoch for x in log if x.kind == "fence"]
    assert fence_epochs == sorted(set(fence_epochs))  # type: ignore[type-var]
    assert set(history.acquired) <= set(fence_epochs)
    newest: int | None = None
    for x in log:
        if x.kind == "fence":
            newest = x.epoch
        elif x.kind == "step":
            assert x.epoch == newest, f"seq {x.seq}: epoch {x.epoch} under fence {newest}"
        else:
            assert x.kind == "prompt" and x.epoch is None
    for op_id, got in by_id.items():
        assert {x.epoch for x in got} == {history.tried[op_id]["epoch"]}

    # The race really happened: takeovers, refusals, prompts between fenced batches.
    assert len(fence_epochs) >= 8
    assert len(history.refused) >= 1
    assert sum(op.startswith("p-") for op in history.ok) >= 5
    assert sum(op.startswith("w0-") for op in history.ok) >= 5  # the killed one wrote
    # The prompts asked for a wake; exactly one is pending for the session (W7, W11).
    lease = await world.take_wake(lease=5)
    assert lease is not None and lease.session_id == SHARED
    assert await world.take_wake(lease=5) is None
    await world.close()


async def test_sigkill_during_append_with_wake_tears_nothing_and_loses_no_wake(
    tmp_path: Path,
) -> None:
    db = tmp_path / "world.db"
    world = SqliteWorld(db)
    await world.setup()
    files: list[Path] = []
    for round_ in range(3):
        record = tmp_path / f"k{round_}.jsonl"
        files.append(record)
        proc = spawn("wakeloop", db, f"k{round_}", 60, record)
        try:
            await asyncio.to_thread(wait_for_records, record, "ok", 3)
            await asyncio.sleep(random.uniform(0.0, 0.05))
            proc.send_signal(signal.SIGKILL)
            await asyncio.to_thread(proc.wait, timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == -signal.SIGKILL

    history = History(files)
    sessions = await world.list_sessions(limit=1000)
    assert set(sessions) <= set(history.tried)
    for sid in sessions:
        got = await all_entries(world, sid)
        assert [x.data["i"] for x in got] == list(range(WAKE_BATCH)), f"{sid}: torn batch"
    for sid, seq in history.ok.items():
        assert sid in sessions, f"acknowledged {sid} lost"
        assert seq == WAKE_BATCH
    # Every session whose entries landed owes exactly one wake, and no other does.
    woken: list[str] = []
    while (lease := await world.take_wake(lease=60)) is not None:
        woken.append(lease.session_id)
    assert sorted(woken) == sorted(sessions)
    await world.close()
    raw = sqlite3.connect(db)
    try:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        raw.close()


def test_processes_race_to_create_the_schema(tmp_path: Path) -> None:
    """Several processes opening a fresh file at once all succeed (setup is
    idempotent and safe to run concurrently)."""
    db = tmp_path / "fresh" / "world.db"
    files = [tmp_path / f"c{i}.jsonl" for i in range(4)]
    procs = [spawn("prompts", db, f"c{i}", 0.3, files[i]) for i in range(4)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    history = History(files)
    assert history.ok and not history.indeterminate

    async def check() -> None:
        world = SqliteWorld(db)
        check_batches(await all_entries(world, SHARED), history)
        await world.close()

    asyncio.run(check())
