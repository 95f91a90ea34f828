"""Issue 43, item 18: ``fxworld import --resume`` finishes an import stopped while it
was giving out the wakes, after a worker answered a session that got its wake: that
session is imported (its log starts with the file's), the others get their wakes,
and the marker goes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fxworld import MemoryWorld, NewEntry, SqliteWorld
from fxworld.cli import main
from fxworld.errors import BackendUnavailable
from fxworld.moving import export_sessions, import_file
from tests.moving.targets import run

SESSIONS = ["a", "b", "c"]


class _StopsAtSecondWake:
    """The target, losing its connection for good at the import's second wake."""

    def __init__(self, world: Any) -> None:
        self.world, self.wakes = world, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.world, name)

    async def wake(self, sid: str, *, delay: float = 0.0) -> None:
        self.wakes += 1
        if self.wakes == 2:
            raise BackendUnavailable("connection lost")
        await self.world.wake(sid, delay=delay)


async def _file(path: Path) -> Path:
    source = MemoryWorld()
    for sid in SESSIONS:
        prompt = NewEntry("prompt", {"v": 1, "text": f"hi {sid}", "key": "k"})
        await source.append(sid, [prompt], key="prompt:k", wake=0.0)  # owes a wake
    with path.open("w", encoding="utf-8") as f:
        await export_sessions(source, SESSIONS, f)
    return path


async def _stopped_then_answered(db: Path, file: Path) -> None:
    world = SqliteWorld(db)
    try:
        await world.setup()
        try:
            await import_file(_StopsAtSecondWake(world), file)
            raise AssertionError("the import was not stopped")
        except BackendUnavailable:
            pass
        wake = await world.take_wake(lease=30.0)  # a worker takes the one wake given
        assert wake is not None and wake.session_id == "a"
        assert await world.take_wake(lease=30.0) is None  # b and c have none
        fence = await world.acquire("a")
        answer = NewEntry("turn.finished", {"v": 1, "prompt": 1, "turn": "t"})
        await world.append("a", [answer], fence=fence)
        await world.finish_wake(wake)
    finally:
        await world.close()


async def _after_resume(db: Path) -> tuple[list[str], set[str], list[str]]:
    world = SqliteWorld(db)
    try:
        sessions = await world.list_sessions(limit=100)
        woken = set()
        while (wake := await world.take_wake(lease=30.0)) is not None:
            woken.add(wake.session_id)
        return sessions, woken, [e.kind for e in await world.read("a")]
    finally:
        await world.close()


def test_resume_finishes_an_import_stopped_at_its_wakes_after_a_worker_answered(
    tmp_path: Path,
) -> None:
    file = run(_file(tmp_path / "x.jsonl"))
    db = tmp_path / "t.db"
    run(_stopped_then_answered(db, file))
    assert main(["import", "--resume", "--world", f"sqlite:///{db}", str(file)]) == 0
    sessions, woken, answered = run(_after_resume(db))
    assert sessions == SESSIONS  # the marker is gone
    assert woken == {"b", "c"}  # the remaining sessions got their wakes; a needs none
    assert answered == ["prompt", "fence", "turn.finished"]  # the worker's answer is kept
