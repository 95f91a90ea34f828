"""fxworld.prune and `fxworld sessions prune` on every engine world: idle sessions
go whole; a running turn, a waiting approval, a waiting prompt, a pending wake
and a prompt that arrives between the look and the delete keep theirs.

With a world that has no ``delete_if_idle`` (``IdleDeleter``), prune must refuse
to delete and still report with ``dry_run``. The reasons "lease held" and "wake
pending" come from ``wake_state`` (``WakeLister``); on a world without it the same
sessions are kept for the reason the log gives, or because ``delete_if_idle``
refused.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

import fxworld
from fxworld import Agent, ToolContext, tool
from fxworld.cli import main
from fxworld.errors import ConfigurationError, InvalidArgument
from fxworld.protocol import IdleDeleter, SessionLister, WakeLister, World
from fxworld.testing import ScriptedModel, moved_clock

pytestmark = pytest.mark.timeout(90)

IDLE = 0.5  # seconds: the sessions made before the pause are "idle" after it
_gate: dict[str, asyncio.Event] = {}


@tool(needs_approval=True)
def refund(id: str) -> str:
    """Refund an order."""
    return f"refunded {id}"


@tool
async def hold(ctx: ToolContext) -> str:
    """Runs until the test lets it go."""
    _gate["started"].set()
    await _gate["held"].wait()
    return "released"


class LateArrival:
    """A real world whose ``delete_if_idle`` lets a prompt land first, as if a
    client's prompt arrived between prune's look and its delete."""

    def __init__(self, inner: Any, victim: str) -> None:
        self.inner, self.victim = inner, victim
        # The optional methods prune looks for, as attributes: from Python 3.12 on,
        # isinstance() against a Protocol does not see what __getattr__ would give.
        for name in ("list_sessions", "last_entry", "wake_state", "list_wakes"):
            if hasattr(inner, name):
                setattr(self, name, getattr(inner, name))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def delete_if_idle(self, session_id: str, *, last: int) -> bool:
        if session_id == self.victim:
            await self.inner.append(session_id, [fxworld.NewEntry("prompt", {"text": "wait!"})])
        return bool(await self.inner.delete_if_idle(session_id, last=last))


def _idle_by_now(fresh_at: float) -> list[str]:
    """``["fresh"]`` if the session written after ``fresh_at`` may have turned idle
    by now (a prune on a slow world, S3 on a loaded machine, can take longer than
    IDLE), else ``[]``: prune cannot have deleted it then."""
    return ["fresh"] if time.time() - fresh_at > IDLE else []


async def _answered(world: World, sid: str, replies: list[Any], *tools: Any) -> Agent:
    agent = Agent(ScriptedModel(replies), tools=list(tools), world=world)
    await agent.session(sid).prompt("hello").accepted
    await asyncio.wait_for(agent.work(until_idle=True, lease=10.0, poll_interval=0.02), 60)
    return agent


async def test_prune_deletes_idle_sessions_whole_and_keeps_busy_ones(
    engine_world_url: str,
) -> None:
    _gate["held"] = held = asyncio.Event()
    _gate["started"] = asyncio.Event()
    world = fxworld.open_world(engine_world_url)
    await world.setup()
    runner = Agent(ScriptedModel([{"tool": "hold", "input": {}}, "ok"]), tools=[hold], world=world)
    worker = None
    try:
        for sid in ("old-1", "old-2", "scheduled", "late"):
            await _answered(world, sid, ["Hi."])
        await _answered(world, "approval", [{"tool": "refund", "input": {"id": "A"}}], refund)
        await world.wake("scheduled", delay=3600)
        await runner.session("running").prompt("go").accepted
        worker = asyncio.create_task(runner.work(concurrency=1, lease=10.0, poll_interval=0.02))
        await asyncio.wait_for(_gate["started"].wait(), 60)
        # the one worker is busy: this prompt waits, with its wake due
        await Agent(ScriptedModel(["x"]), world=world).session("queued").prompt("q").accepted
        await asyncio.sleep(IDLE + 0.3)
        fresh_at = time.time()
        await world.append("fresh", [fxworld.NewEntry("note", {})])
        if not isinstance(world, SessionLister):
            with pytest.raises(ConfigurationError, match="cannot list"):
                await fxworld.prune(world, idle_for=IDLE)
            return
        before = {sid: await world.read(sid, 0) for sid in await world.list_sessions()}
        dry = await fxworld.prune(world, idle_for=IDLE, dry_run=True)
        assert {sid: await world.read(sid, 0) for sid in before} == before
        if not isinstance(world, IdleDeleter):
            with pytest.raises(ConfigurationError, match="delete_if_idle"):
                await fxworld.prune(world, idle_for=IDLE)
            assert {sid: await world.read(sid, 0) for sid in before} == before
            return
        report = await fxworld.prune(LateArrival(world, "late"), idle_for=f"{IDLE}s")  # type: ignore[arg-type]
        assert {"old-1", "old-2"} <= set(report.deleted)
        assert set(report.deleted) <= {"old-1", "old-2", *_idle_by_now(fresh_at)}
        assert set(dry.deleted) >= {"old-1", "old-2"}
        assert report.kept["approval"] == "approval waiting"
        assert report.kept["late"].startswith("changed while pruning")
        assert set(report.kept) == {"approval", "late", "queued", "running", "scheduled"}
        if isinstance(world, WakeLister):
            assert report.kept["running"].startswith("lease held")
            assert report.kept["scheduled"].startswith("wake pending")
            assert report.kept["queued"].startswith("wake pending")
        else:
            assert report.kept["queued"] == "prompt waiting"
            assert report.kept["running"] == "turn in progress"
        assert report.scanned == len(before)
        for sid in ("old-1", "old-2"):
            assert await world.read(sid, 0) == []
        for sid in report.kept:
            assert await world.read(sid, 0), sid
        assert [e.kind for e in await world.read("late", 0)][-1] == "prompt"
        again = await fxworld.prune(world, idle_for=IDLE)  # a rerun deletes nothing more
        assert set(again.deleted) <= set(_idle_by_now(fresh_at)) and "old-1" not in again.kept
    finally:
        held.set()
        runner.stop()
        if worker is not None:
            await asyncio.wait_for(worker, 30)
        await world.close()


async def test_prune_refuses_a_bad_idle_for_before_any_io() -> None:
    world = fxworld.MemoryWorld()
    await world.append("s", [fxworld.NewEntry("note", {})])
    for bad in ["30", "30x", "-1d", "0s", "", "d30", 0, -5, None, True]:
        with pytest.raises(InvalidArgument):
            await fxworld.prune(world, idle_for=bad)  # type: ignore[arg-type]
    assert len(await world.read("s")) == 1


def test_cli_prune(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"

    async def seed() -> None:
        world = fxworld.open_world(url)
        await _answered(world, "old", ["Hi."])
        await world.close()

    asyncio.run(seed())
    assert main(["sessions", "prune", "--world", url, "--idle-for", "1 month"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "like 30d, 12h or 90s" in err
    assert main(["sessions", "prune", "--world", url, "--idle-for", "30d"]) == 0
    out = capsys.readouterr()
    assert out.out == "" and "0 deleted, 0 kept although idle, 1 looked at" in out.err
    assert main(["sessions", "prune", "--world", url, "--idle-for", "1h", "--dry-run"]) == 0
    assert capsys.readouterr().out == ""
    with moved_clock() as clock:
        clock.advance(1.1)  # "old" has been idle for more than 1 s
        assert main(["sessions", "prune", "--world", url, "--idle-for", "1s", "--dry-run"]) == 0
        assert capsys.readouterr().out == "would delete old\n"
        assert main(["sessions", "prune", "--world", url, "--idle-for", "1s"]) == 0
        assert capsys.readouterr().out == "deleted old\n"
    assert main(["sessions", "list", "--world", url]) == 0
    assert capsys.readouterr().out == ""


def test_cli_fork(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"

    async def seed() -> None:
        world = fxworld.open_world(url)
        await _answered(world, "src", ["Hi."])
        await world.close()

    asyncio.run(seed())
    assert main(["sessions", "fork", "src", "--world", url, "--id", "copy"]) == 0
    assert capsys.readouterr().out == "copy\n"
    assert main(["sessions", "fork", "src", "--world", url, "--at", "3.x"]) == 2
    assert "InvalidCursor" in capsys.readouterr().err
    assert main(["sessions", "fork", "nope", "--world", url]) == 1
    assert "no session 'nope'" in capsys.readouterr().err
    assert main(["sessions", "list", "--world", url]) == 0
    assert sorted(x.split()[0] for x in capsys.readouterr().out.splitlines()) == ["copy", "src"]
