"""Rerunning a copy: a real ``fxworld copy`` killed with SIGKILL in the middle, rerun,
finishes with no duplicate; a session that grew in the source (after a takeover)
is brought up to date; a target that diverged is refused and left as it is;
``--verify`` catches a difference; a world that cannot list needs ``--session``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fxworld import MemoryWorld, NewEntry, SqliteWorld, register_scheme, unregister_scheme
from fxworld.cli import main
from fxworld.errors import SessionDiverged
from fxworld.moving import copy_session, copy_sessions, verify
from tests.moving.logs import kit_findings, logs_of, same_log, whole

pytestmark = pytest.mark.timeout(120)

MANY = [f"s{n:03d}" for n in range(120)]


async def _many(path: Path) -> None:
    """120 sessions of 61 entries: a prompt, then 3 takeovers of 20 entries each."""
    world = SqliteWorld(path)
    try:
        for sid in MANY:
            await world.append(sid, [NewEntry("prompt", {"v": 1, "text": sid, "key": sid})],
                               key=f"prompt:{sid}")  # fmt: skip
            for t in range(3):
                fence = await world.acquire(sid)
                for i in range(19):
                    await world.append(sid, [NewEntry("step", {"t": t, "i": i})], fence=fence)
    finally:
        await world.close()


async def _sessions_in(path: Path, exists: bool) -> int:
    if not exists:
        return 0
    world = SqliteWorld(path)
    try:
        return len(await world.list_sessions(limit=1000))
    finally:
        await world.close()


def test_a_killed_copy_rerun_finishes_with_no_duplicate(tmp_path: Path) -> None:
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    asyncio.run(_many(source))
    argv = [sys.executable, "-m", "fxworld", "copy", "--from", f"sqlite:///{source}",
            "--to", f"sqlite:///{target}", "--quiet"]  # fmt: skip
    copying = subprocess.Popen(argv, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while asyncio.run(_sessions_in(target, target.exists())) < 20:  # part way: some sessions copied
        assert copying.poll() is None, "the copy ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(copying.pid, signal.SIGKILL)
    copying.wait()
    assert 20 <= asyncio.run(_sessions_in(target, target.exists())) < len(MANY)
    rerun = subprocess.run([*argv, "--verify"], capture_output=True, text=True, timeout=100)
    assert rerun.returncode == 0, rerun.stderr
    assert f"verified: {len(MANY)} sessions match" in rerun.stderr
    asyncio.run(_same_worlds(source, target))


async def _same_worlds(source: Path, target: Path) -> None:
    a, b = SqliteWorld(source), SqliteWorld(target)
    try:
        ours, theirs = await logs_of(a, MANY), await logs_of(b, MANY)
        for sid in MANY:
            same_log(theirs[sid], ours[sid])  # no duplicate, nothing missing
        assert kit_findings(theirs) == []
    finally:
        await a.close()
        await b.close()


async def test_a_session_that_grew_is_brought_up_to_date() -> None:
    source, target = MemoryWorld(), MemoryWorld()
    await source.append("s", [NewEntry("prompt", {"v": 1, "text": "hi", "key": "k"})])
    fence = await source.acquire("s")  # the copy stops right after a takeover
    first = await copy_session(source, target, "s")
    assert (first.entries, first.written) == (2, 2)
    await source.append("s", [NewEntry("step", {"i": i}) for i in range(3)], fence=fence)
    await source.append("s", [NewEntry("prompt", {"v": 1, "text": "more", "key": "k2"})])
    again = await copy_session(source, target, "s")  # goes on with the target's fence
    assert (again.entries, again.written) == (6, 4)
    assert (await copy_session(source, target, "s")).written == 0
    same_log(await whole(target, "s"), await whole(source, "s"))
    assert await verify(source, target, ["s"]) == []


async def test_a_diverged_target_is_refused_and_left_alone() -> None:
    source, target = MemoryWorld(), MemoryWorld()
    await source.append("s", [NewEntry("note", {"i": i}) for i in range(3)])
    await copy_session(source, target, "s")
    await target.acquire("s")  # a worker on the target took over: the logs part ways
    await source.append("s", [NewEntry("note", {"i": 3})])
    before = await whole(target, "s")
    with pytest.raises(SessionDiverged, match="at seq 4"):
        await copy_session(source, target, "s")
    assert await whole(target, "s") == before
    assert await verify(source, target, ["s"]) == ["s: same 4 entries, but their hashes differ"]
    await target.append("s", [NewEntry("note", {"i": 9})])
    assert await verify(source, target, ["s"]) == ["s: 4 entries in the source, 5 in the copy"]


async def test_verify_catches_data_that_differs() -> None:
    source, target = MemoryWorld(), MemoryWorld()
    await source.append("s", [NewEntry("note", {"i": 1})])
    await target.append("s", [NewEntry("note", {"i": 2})])
    assert await verify(source, target, ["s"]) == ["s: same 1 entries, but their hashes differ"]


class NoListWorld(MemoryWorld):
    """A world without ``list_sessions``, as a third-party one may be."""

    list_sessions = None  # type: ignore[assignment]


def test_copy_names_session_when_the_world_cannot_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    register_scheme("nolist", "tests.moving.test_copy_resume:NoListWorld")
    try:
        target = f"sqlite:///{tmp_path}/t.db"
        assert main(["copy", "--from", "nolist://", "--to", target]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "cannot list its sessions" in err and "--session" in err
        assert main(["copy", "--from", "nolist://", "--to", target, "--session", "s"]) == 0
    finally:
        unregister_scheme("nolist")


def test_verify_in_the_cli_and_the_progress_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = f"sqlite:///{tmp_path}/s.db", f"sqlite:///{tmp_path}/t.db"
    asyncio.run(_two(source, target))
    assert main(["copy", "--from", source, "--to", target, "--verify", "--progress"]) == 2
    err = capsys.readouterr().err
    assert "SessionDiverged: session 'b' at seq 2" in err  # and a was not copied either
    assert main(["copy", "--from", source, "--to", target, "--session", "a", "--progress"]) == 0
    err = capsys.readouterr().err
    assert "entries/s" in err and "sessions/s" in err  # asked for: a bar, not a TTY
    assert main(["copy", "--from", source, "--to", target, "--session", "a", "--verify"]) == 0
    err = capsys.readouterr().err
    assert "verified: 1 sessions match" in err and "entries/s" not in err


async def _two(source: str, target: str) -> None:
    a, b = (SqliteWorld(url.removeprefix("sqlite:///")) for url in (source, target))
    try:
        await a.append("a", [NewEntry("note", {})])
        await a.append("b", [NewEntry("note", {})])
        await b.append("b", [NewEntry("note", {}), NewEntry("other", {})])
    finally:
        await a.close()
        await b.close()


def test_a_copy_from_a_missing_world_or_to_an_unknown_url_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing, target = f"sqlite:///{tmp_path}/missing.db", tmp_path / "t.db"
    for sessions in ([], ["--session", "s1"]):
        assert main(["copy", "--from", missing, "--to", f"sqlite:///{target}", *sessions]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "does not exist" in err, err
    assert main(["copy", "--from", "memory://", "--to", "sqlit:///x.db", "--session", "s"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


class _Intruder(MemoryWorld):
    """A target where another process appends to session b while a is written."""

    async def append(self, session_id: str, *args: Any, **kwargs: Any) -> int:
        if session_id == "a":
            await super().append("b", [NewEntry("note", {"intruder": True})])
        return await super().append(session_id, *args, **kwargs)


async def test_a_copy_leaves_no_fence_behind_when_a_session_changes_after_it_was_compared() -> None:
    source, target = MemoryWorld(), _Intruder()
    await source.append("a", [NewEntry("note", {})])
    await source.append("b", [NewEntry("note", {})])
    await target.append("b", [NewEntry("note", {})])  # b is a prefix: compared, found fine
    fence = await source.acquire("b")  # the next write to b is a takeover
    await source.append("b", [NewEntry("step", {})], fence=fence)
    with pytest.raises(SessionDiverged, match="session 'b' at seq 2: another process wrote"):
        await copy_sessions(source, target, ["a", "b"])
    assert [e.kind for e in await whole(target, "b")] == ["note", "note"]  # no fence
