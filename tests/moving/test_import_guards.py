"""Issue 34, items 6-9: an import never extends a session the target has (``--resume``
finishes only an interrupted import of the same file), checks the whole file against
the target's own limits, is all or nothing like ``copy`` on a diverged session, is
one line on deeply nested JSON, and reads a pipe once. Every refusal leaves the
target's contents as they were."""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fxworld import MemoryWorld, NewEntry, SqliteWorld, register_scheme, unregister_scheme
from fxworld.cli import main
from fxworld.errors import BackendUnavailable, InvalidArgument
from fxworld.moving import check_file, export_sessions, import_file, marker_id
from tests.moving.logs import (
    SESSIONS,
    fill,
    fill_sqlite,
    kit_findings,
    logs_of,
    same_log,
    same_sqlite,
    whole,
)
from tests.moving.targets import Target, contents, entry, make_target, run, write_file

pytestmark = pytest.mark.timeout(120)

DOCS = Path(__file__).parents[2] / "docs" / "backends.md"


@pytest.fixture(autouse=True)
def _shared_scheme() -> Iterator[None]:
    register_scheme("shared", "tests.moving.targets:shared_world")
    yield
    unregister_scheme("shared")


@pytest.fixture(params=["sqlite", "memory"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return make_target(request.param, tmp_path, 1 << 20)


def _one_line_refusal(argv: list[str], capsys: pytest.CaptureFixture[str], said: str) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err and "Traceback" not in err, err
    return err


# -- item 6: import extends live sessions -------------------------------------------------


async def _live(world: Any) -> Any:
    """A live session: a refund waiting for a person's approval, its worker's fence."""
    await world.setup()
    await world.append("s", [NewEntry("prompt", {"v": 1, "text": "refund", "key": "k"})],
                       key="prompt:k")  # fmt: skip
    fence = await world.acquire("s")
    requested = {"v": 2, "execution_id": "x1", "tool": "refund", "input": {}}
    await world.append("s", [NewEntry("turn.started", {"v": 1, "prompt": 1, "turn": "t"}),
                             NewEntry("approval.requested", requested)], fence=fence)  # fmt: skip
    return fence


async def _extending_file(world: Any, path: Path) -> Path:
    """The live log, then a takeover and an approval the file makes up, with a wake."""
    log = await whole(world, "s")
    epoch = max(e.epoch or 0 for e in log) + 1
    decided = {"v": 2, "execution_id": "x1", "approved": True, "note": None}
    more = [entry("s", len(log) + 1, "fence", {"epoch": epoch}, epoch),
            entry("s", len(log) + 2, "approval.decided", decided)]  # fmt: skip
    return write_file(path, [*log, *more], wakes={"s": datetime.now(UTC)})


def test_import_extends_live_sessions(
    target: Target, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fence = target.use(_live)
    file = target.use(lambda w: _extending_file(w, tmp_path / "x.jsonl"))
    before = target.use(lambda w: contents(w, ["s"]))
    err = _one_line_refusal(["import", "--world", target.url, str(file)], capsys, "already has")
    assert "'s'" in err and "--resume" not in err
    _one_line_refusal(["import", "--resume", "--world", target.url, str(file)], capsys,
                      "nothing to resume")  # fmt: skip
    assert target.use(lambda w: contents(w, ["s"])) == before

    async def worker_still_holds_it(world: Any) -> None:
        assert await world.take_wake(lease=5.0) is None  # no wake was given
        await world.append("s", [NewEntry("note", {})], fence=fence)  # not fenced out

    target.use(worker_still_holds_it)


class _RacingWorker:
    """The target, with its worker writing a step just before each takeover lands."""

    def __init__(self, world: Any, fence: Any) -> None:
        self.world, self.fence = world, fence

    def __getattr__(self, name: str) -> Any:
        return getattr(self.world, name)

    async def acquire(self, sid: str) -> Any:
        await self.world.append(sid, [NewEntry("step", {})], fence=self.fence)
        return await self.world.acquire(sid)


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
async def test_import_leaves_no_fence_behind_when_a_session_diverges(
    kind: str, tmp_path: Path
) -> None:
    world: Any = SqliteWorld(tmp_path / "t.db") if kind == "sqlite" else MemoryWorld()
    try:
        fence = await _live(world)
        file = await _extending_file(world, tmp_path / "x.jsonl")
        before = await contents(world, ["s"])
        with pytest.raises(InvalidArgument, match="already has 1 of the file's 1 sessions"):
            await import_file(_RacingWorker(world, fence), file)
        assert await contents(world, ["s"]) == before  # no takeover, no stray fence
        await world.append("s", [NewEntry("note", {})], fence=fence)  # still the newest
    finally:
        await world.close()


async def _source_file(path: Path) -> tuple[MemoryWorld, Path]:
    source = MemoryWorld()
    await fill(source)
    with path.open("w", encoding="utf-8") as f:
        await export_sessions(source, SESSIONS, f)
    return source, path


class _Interrupted:
    """The target, losing its connection for good after ``left`` more writes."""

    def __init__(self, world: Any, left: int) -> None:
        self.world, self.left = world, left

    def __getattr__(self, name: str) -> Any:
        return getattr(self.world, name)

    async def _spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise BackendUnavailable("connection lost")

    async def append(self, *args: Any, **kwargs: Any) -> Any:
        await self._spend()
        return await self.world.append(*args, **kwargs)

    async def acquire(self, sid: str) -> Any:
        await self._spend()
        return await self.world.acquire(sid)


def test_import_resume_finishes_only_an_interrupted_import_of_the_same_file(
    target: Target, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, file = run(_source_file(tmp_path / "x.jsonl"))
    other = run(_source_file(tmp_path / "y.jsonl"))[1]  # the same sessions, another export

    async def interrupted(world: Any) -> None:
        await world.setup()
        with pytest.raises(BackendUnavailable):
            await import_file(_Interrupted(world, 12), file)  # the marker and 11 writes

    target.use(interrupted)
    part = target.use(lambda w: contents(w, SESSIONS))
    total = sum(len(log) for log in run(logs_of(source, SESSIONS)).values())
    assert 0 < sum(len(part[sid]) for sid in SESSIONS) < total  # stopped half-way
    err = _one_line_refusal(["import", "--world", target.url, str(file)], capsys, "already has")
    assert "interrupted: rerun it with --resume" in err
    _one_line_refusal(["import", "--resume", "--world", target.url, str(other)], capsys,
                      "nothing to resume")  # fmt: skip
    assert target.use(lambda w: contents(w, SESSIONS)) == part
    assert main(["import", "--resume", "--world", target.url, str(file)]) == 0

    async def whole_again(world: Any) -> None:
        copied, logs = await logs_of(world, SESSIONS), await logs_of(source, SESSIONS)
        for sid in SESSIONS:
            same_log(copied[sid], logs[sid])
        assert kit_findings(copied) == []
        assert await world.list_sessions(limit=100) == sorted(SESSIONS)  # the marker is gone
        wake = await world.take_wake(lease=5.0)
        assert wake is not None and wake.session_id == "chat"

    target.use(whole_again)


# -- item 7: import is not all-or-nothing ------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "memory", "redis"])
def test_import_is_not_all_or_nothing_on_the_target_max_entry_bytes(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    redis = request.getfixturevalue("redis_url") if kind == "redis" else ""
    target = make_target(kind, tmp_path, 2000, redis)
    small = [entry("a", n, "note", {"n": n}) for n in (1, 2, 3)]
    file = write_file(tmp_path / "x.jsonl", [*small, entry("b", 1, "note", {"pad": "x" * 3000})])
    argv = ["import", "--world", target.url, str(file)]
    err = _one_line_refusal(argv, capsys, "is over the limit of 2000 bytes")
    assert "x.jsonl:5:" in err  # the line of b's entry: a (lines 2-4) was not written
    if kind != "sqlite":
        assert target.use(lambda w: contents(w, ["a", "b"])) == {"a": [], "b": [], "(listed)": []}
    else:
        assert not (tmp_path / "target.db").exists()  # not even an empty world


def _diverged_pair(target: Target, tmp_path: Path) -> tuple[str, Path]:
    """A source world with sessions a and b, and its export; the target holds b with
    one entry more than the source (its worker went on there)."""
    source = f"sqlite:///{tmp_path}/source.db"

    async def fill_target(world: Any) -> None:
        await world.setup()
        await world.append("b", [NewEntry("note", {"i": 0}), NewEntry("other", {})])

    async def fill_source() -> None:
        world = SqliteWorld(tmp_path / "source.db")
        await world.append("a", [NewEntry("note", {"i": i}) for i in range(3)])
        await world.append("b", [NewEntry("note", {"i": 0})])
        await world.close()

    run(fill_source())
    target.use(fill_target)
    assert main(["export", "--world", source, "--out", str(tmp_path / "x.jsonl")]) == 0
    return source, tmp_path / "x.jsonl"


def test_import_and_copy_behave_the_same_on_a_diverged_session(
    target: Target, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, file = _diverged_pair(target, tmp_path)
    before = target.use(lambda w: contents(w, ["a", "b"]))
    _one_line_refusal(["copy", "--from", source, "--to", target.url, "--verify"], capsys,
                      "SessionDiverged: session 'b' at seq 2")  # fmt: skip
    assert target.use(lambda w: contents(w, ["a", "b"])) == before  # a was not copied either
    _one_line_refusal(["import", "--world", target.url, str(file)], capsys, "already has")

    async def interrupted_earlier(world: Any) -> None:  # as if an import of file had begun
        await world.append(marker_id(check_file(file)), [NewEntry("import.started", {})])

    target.use(interrupted_earlier)
    before = target.use(lambda w: contents(w, ["a", "b"]))
    _one_line_refusal(["import", "--resume", "--world", target.url, str(file)], capsys,
                      "SessionDiverged: session 'b' at seq 2")  # fmt: skip
    assert target.use(lambda w: contents(w, ["a", "b"])) == before
    # Without b, both go through.
    assert main(["copy", "--from", source, "--to", target.url, "--session", "a"]) == 0


# -- item 8: deeply nested JSON ---------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("where", ["header", "data", "seq", "wake"])
def test_deeply_nested_json_in_an_import_line_or_header_is_one_line(
    target: Target, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    good = write_file(tmp_path / "good.jsonl", [entry("a", 1, "note", {"i": 1})],
                      wakes={"a": datetime.now(UTC)})  # fmt: skip
    lines = good.read_text().splitlines(keepends=True)
    if where == "header":
        lines[0] = lines[0].replace('"version":1', f'"version":{DEEP}')
    elif where == "data":
        lines[1] = lines[1].replace('"data":{"i":1}', f'"data":{{"i":{DEEP}}}')
    elif where == "seq":
        lines[1] = lines[1].replace('"seq":1', f'"seq":{DEEP}')
    else:
        lines[2] = lines[2].replace('"t":"wake"', f'"t":"wake","x":{DEEP}')
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(lines))
    target.use(lambda w: w.setup())
    before = target.use(lambda w: contents(w, ["a"]))
    err = _one_line_refusal(["import", "--world", target.url, str(bad)], capsys, "InvalidArgument")
    assert "nested too deeply" in err and len(err) < 300, err
    assert target.use(lambda w: contents(w, ["a"])) == before


# -- item 9: a pipe -----------------------------------------------------------------------


def _docs_pipe() -> str:
    """The pipe docs/backends.md shows, export into import."""
    lines = [line for line in DOCS.read_text().splitlines() if "| fxworld import" in line]
    assert len(lines) == 1, lines
    return lines[0].strip()


def test_export_piped_into_import_reads_the_file_once(tmp_path: Path) -> None:
    """The pipe of docs/backends.md, run by a shell: two fxworld processes."""
    pipe = _docs_pipe()
    assert pipe.startswith("fxworld export --world sqlite:///old.db") and "/dev/stdin" in pipe
    asyncio.run(fill_sqlite(tmp_path / "old.db"))
    fxworld = f"{shlex.quote(sys.executable)} -m fxworld"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    for n, command in enumerate((pipe, pipe.replace("/dev/stdin", "-"))):
        shell = command.replace("fxworld ", f"{fxworld} ").replace("new.db", f"new{n}.db")
        done = subprocess.run(["bash", "-o", "pipefail", "-c", shell], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=100)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "imported 4 sessions" in done.stderr
        asyncio.run(same_sqlite(tmp_path / "old.db", tmp_path / f"new{n}.db"))
