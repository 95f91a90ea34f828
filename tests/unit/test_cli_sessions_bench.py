"""`fxworld sessions list|show` and `fxworld bench`, as a user runs them."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fxworld import NewEntry, SqliteWorld
from fxworld.cli import main

ROOT = Path(__file__).resolve().parents[2]


def seed(path: Path) -> None:
    async def run() -> None:
        w = SqliteWorld(path)
        f = await w.acquire("chat-1")
        await w.append("chat-1", [NewEntry("prompt", {"text": "héllo"})])
        await w.append("chat-1", [NewEntry("message", {"text": "hi", "n": 2})], fence=f)
        await w.append("chat-1", [NewEntry("message", {"text": "y" * 500})], fence=f)
        await w.append("b-session", [NewEntry("prompt", {"text": "x"})])
        await w.append("gone", [NewEntry("prompt", {"text": "x"})])
        await w.delete("gone")
        await w.close()

    asyncio.run(run())


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "w.db"
    seed(path)
    return path


def test_sessions_list(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "list", "--world", f"sqlite:///{db}"]) == 0
    out, err = capsys.readouterr()
    assert [line.split()[:2] for line in out.splitlines()] == [
        ["b-session", "running"],  # newest first: its prompt waits for a turn
        ["chat-1", "running"],
    ]
    assert "2 sessions in sqlite:///" in err
    assert main(["sessions", "list", "--world", f"sqlite:///{db}", "--limit", "1"]) == 0
    out, err = capsys.readouterr()
    assert [line.split()[0] for line in out.splitlines()] == ["b-session"]
    assert "1 of 2 sessions in sqlite:///" in err  # the world holds two, not one


def test_sessions_list_uses_fxworld_url(
    db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FXWORLD_URL", f"sqlite:///{db}")
    assert main(["sessions", "list"]) == 0
    assert [x.split()[0] for x in capsys.readouterr().out.splitlines()] == ["b-session", "chat-1"]
    monkeypatch.setenv("FXWORLD_URL", f"sqlite:///{db}?namespace=elsewhere")
    assert main(["sessions", "list"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "0 sessions" in err


def test_sessions_show_prints_the_log(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "show", "chat-1", "--world", f"sqlite:///{db}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["seq", "time", "(UTC)", "kind", "epoch", "data"]
    rows = [line.split(None, 5) for line in lines[1:]]
    assert [(r[0], r[3], r[4]) for r in rows] == [
        ("1", "fence", "1"),
        ("2", "prompt", "-"),
        ("3", "message", "1"),
        ("4", "message", "1"),
    ]
    assert rows[0][5] == '{"epoch":1}'
    assert rows[1][5] == '{"text":"héllo"}'
    assert rows[2][5] == '{"text":"hi","n":2}'
    assert rows[3][5].endswith("…") and len(rows[3][5]) == 120  # long data is cut
    assert rows[1][1].count("-") == 2 and rows[1][2].count(":") == 2  # date and time


def test_sessions_show_after_and_full(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{db}"
    assert main(["sessions", "show", "chat-1", "--world", url, "--after", "3", "--full"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[1].split(None, 5)[5] == '{"text":"' + "y" * 500 + '"}'


def test_sessions_show_empty_or_bad_id(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{db}"
    assert main(["sessions", "show", "nobody", "--world", url]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == f"fxworld sessions show: no session 'nobody' in {url}\n"
    assert main(["sessions", "show", "gone", "--world", url]) == 1
    assert main(["sessions", "show", "chat-1", "--world", url, "--after", "4"]) == 1
    assert "after seq 4" in capsys.readouterr().err
    assert main(["sessions", "show", "../etc", "--world", url]) == 2
    assert "InvalidSessionId" in capsys.readouterr().err
    assert main(["sessions", "show", "chat-1", "--world", url, "--after", "-1"]) == 2
    assert "InvalidArgument" in capsys.readouterr().err
    assert main(["sessions", "list", "--world", "sqlte:///x.db"]) == 2
    assert "did you mean sqlite://" in capsys.readouterr().err


def test_sessions_show_follow_prints_new_entries_until_interrupted(db: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fxworld.cli", "sessions", "show", "chat-1", "--follow"],
        cwd=ROOT,
        env={**os.environ, "FXWORLD_URL": f"sqlite:///{db}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as in a terminal: a shell without job control starts background jobs
        # (a CI script's `&`) with SIGINT ignored, and the CLI would inherit that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(5)]  # header and the 4 entries
        assert lines[0].split()[0] == "seq" and lines[4].split()[0] == "4"

        async def more() -> None:
            w = SqliteWorld(db)
            await w.append("chat-1", [NewEntry("prompt", {"text": "and now?"})])
            await w.close()

        asyncio.run(more())
        new = proc.stdout.readline()  # a blocking read: the test timeout bounds it
        assert new.split()[0] == "5" and new.split()[3] == "prompt"
        assert '{"text":"and now?"}' in new
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_bench_on_sqlite_from_one_and_two_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "bench.db"
    url = f"sqlite:///{db}"
    assert main(["setup", "--world", url]) == 0  # bench measures an existing world
    t0 = time.monotonic()
    assert main(["bench", "--world", url, "--seconds", "0.2", "--processes", "2"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if "process" in line and "CPUs" not in line]
    labels = [(line[:28].strip(), line[28:42].strip()) for line in rows]
    assert labels == [
        ("single-entry append", "1 process"),
        ("single-entry append", "2 processes"),
        ("batch append (10 entries)", "1 process"),
        ("batch append (10 entries)", "2 processes"),
        ("read (100 entries)", "1 process"),
        ("read (100 entries)", "2 processes"),
    ]
    for line in rows:
        calls, entries = (float(x.replace(",", "")) for x in line.split()[-2:])
        assert calls > 0 and entries >= calls
    assert time.monotonic() - t0 < 300  # liveness only
    # It wrote in its own namespace and cleaned up after itself.
    raw = sqlite3.connect(db)
    try:
        assert raw.execute("SELECT count(*) FROM fx_entries").fetchone()[0] == 0
        assert raw.execute("SELECT count(*) FROM fx_wakes").fetchone()[0] == 0
    finally:
        raw.close()


def test_bench_on_memory_runs_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--world", "memory://", "--seconds", "0.1", "--processes", "3"]) == 0
    out = capsys.readouterr().out
    assert "memory://" in out.splitlines()[0]
    assert "3 tasks" in out and "single-entry append" in out
    assert main(["bench", "--world", "memory://", "--seconds", "0"]) == 2
    assert "must be positive" in capsys.readouterr().err


def test_sessions_list_shows_state_and_last_activity_newest_first_and_filters_by_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "w.db"

    async def fill() -> None:
        w = SqliteWorld(db)
        f = await w.acquire("done")
        await w.append("done", [NewEntry("prompt", {"text": "a"})])
        await w.append("done", [NewEntry("turn.started", {"turn": "t1", "prompt": 2})], fence=f)
        await w.append("done", [NewEntry("turn.finished", {"turn": "t1"})], fence=f)
        await w.append("broke", [NewEntry("prompt", {"text": "b"})])
        g = await w.acquire("broke")
        await w.append("broke", [NewEntry("turn.started", {"turn": "t2", "prompt": 1})], fence=g)
        await w.append("broke", [NewEntry("turn.failed", {"turn": "t2"})], fence=g)
        await w.append("asked", [NewEntry("prompt", {"text": "c"})])  # newest
        await w.close()

    asyncio.run(fill())
    url = ["--world", f"sqlite:///{db}"]
    assert main(["sessions", "list", *url]) == 0
    rows = [line.split("  ") for line in capsys.readouterr().out.splitlines()]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [
        ("asked", "running"),
        ("broke", "failed"),
        ("done", "idle"),
    ]
    assert all(r[-1].endswith(" UTC") and r[-1].count(":") == 2 for r in rows)  # last activity
    assert main(["sessions", "list", *url, "--state", "failed"]) == 0
    out, err = capsys.readouterr()
    assert out.split()[:2] == ["broke", "failed"] and "1 failed session in" in err
    with pytest.raises(SystemExit) as bad:
        main(["sessions", "list", *url, "--state", "sleeping"])
    assert bad.value.code == 2 and "invalid choice: 'sleeping'" in capsys.readouterr().err


def test_sessions_show_missing_with_follow_says_once_it_waits_then_follows(db: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fxworld.cli", "sessions", "show", "later", "--follow"],
        cwd=ROOT,
        env={**os.environ, "FXWORLD_URL": f"sqlite:///{db}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        said = proc.stderr.readline()
        assert "no session 'later'" in said and "waiting for it to appear" in said
        assert proc.stdout.readline().split()[0] == "seq"

        async def appear() -> None:
            w = SqliteWorld(db)
            await w.append("later", [NewEntry("prompt", {"text": "here"})])
            await w.close()

        asyncio.run(appear())
        first = proc.stdout.readline()  # a blocking read: the test timeout bounds it
        assert first.split()[0] == "1" and first.split()[3] == "prompt"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
        assert "waiting" not in proc.stderr.read()  # said once
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
