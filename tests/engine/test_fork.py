"""session.fork on every engine world: a fork of a session whose turn is running, a
fork of a fork, the fork prompted at once, and bad input leaving stored data
untouched. The details of what a fork copies are tested on MemoryWorld."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import fxworld
from fxworld import Agent, MemoryWorld, ToolContext, tool
from fxworld.engine import decode_cursor, encode_cursor
from fxworld.errors import AlreadyDecided, Conflict, InvalidArgument, InvalidCursor, UnknownSession
from fxworld.protocol import World
from fxworld.testing import ScriptedModel, read_recording
from fxworld.types import Entry

pytestmark = pytest.mark.timeout(90)

SOURCE = "source"
_gate: dict[str, asyncio.Event] = {}  # made in each test: an event binds to its loop


@tool(idempotent=True)
def lookup(id: str) -> str:
    """Look up an order."""
    return f"order {id} is paid"


@tool
async def hold(ctx: ToolContext) -> str:
    """Runs until the test lets it go (in the source session only)."""
    if ctx.session_id == SOURCE:
        await _gate["held"].wait()
    return "released"


REPLIES: list[Any] = [
    {"tool": "lookup", "input": {"id": "A"}},
    "Order A is paid.",
    {"tool": "hold", "input": {}},
    "Second answer.",
    "Third answer.",
]


async def everything(world: World, sid: str) -> list[Entry]:
    return await world.read(sid, 0, limit=10_000)


async def until(check: Any, what: str) -> None:
    for _ in range(1500):
        if await check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def users(request: dict[str, Any]) -> list[str]:
    return [m["text"] for m in request["messages"] if m["role"] == "user"]


async def test_fork_while_a_turn_runs_then_a_fork_of_the_fork(
    engine_world_url: str, tmp_path: Path
) -> None:
    _gate["held"] = held = asyncio.Event()
    world = fxworld.open_world(engine_world_url)
    model = ScriptedModel(REPLIES, record_to=tmp_path / "model.jsonl")
    agent = Agent(model, tools=[lookup, hold], world=world)
    source = agent.session(SOURCE)
    worker = asyncio.create_task(agent.work(lease=10.0, poll_interval=0.02))
    try:
        await asyncio.wait_for(source.prompt("first").result(), 60)
        await source.prompt("second").accepted

        async def holding() -> bool:
            return any(e.kind == "tool.started" for e in (await everything(world, SOURCE))[7:])

        await until(holding, "the source's second turn to run its tool")
        before = await everything(world, SOURCE)
        fork = await source.fork(id="fork-1")
        # the fork holds the first turn, not the running one
        entries = await everything(world, "fork-1")
        first_end = max(e.seq for e in before if e.kind == "turn.finished")
        assert entries[0].kind == "forked"
        assert entries[0].data["source"] == SOURCE and entries[0].data["at"] == first_end
        assert decode_cursor(SOURCE, entries[0].data["cursor"]) == first_end
        kept = [(e.kind, e.data) for e in before[:first_end] if e.kind != "fence"]
        assert [e.kind for e in entries[1:]] == [k for k, _ in kept]
        assert entries[0].data["entries"] == len(kept)
        assert all(e.epoch is None for e in entries)
        assert await everything(world, SOURCE) == before  # the source is unchanged

        # the fork answers at once, hearing the conversation as of the fork
        await asyncio.wait_for(fork.prompt("third").result(), 60)
        heard = [r for r in read_recording(tmp_path / "model.jsonl") if "third" in users(r)]
        assert users(heard[0]) == ["first", "third"]
        assert [m["role"] for m in heard[0]["messages"]] == [
            "user", "assistant", "tool", "assistant", "user",
        ]  # fmt: skip

        # a fork of the fork, at the end of its turn "third"
        fork_end = (await everything(world, "fork-1"))[-1].seq
        again = await fork.fork(at=encode_cursor("fork-1", fork_end))
        assert [m.text for m in await again.messages() if m.role == "user"] == ["first", "third"]
        second = await everything(world, again.id)
        assert second[0].data["source"] == "fork-1" and second[0].data["at"] == fork_end
        assert [e.kind for e in second].count("forked") == 1

        held.set()
        await until(
            lambda: _ends(world, SOURCE, 2), "the source's running turn to finish after the fork"
        )
        assert (await everything(world, SOURCE))[: len(before)] == before
        await _bad_input_leaves_data_untouched(world, agent, before)
    finally:
        held.set()
        agent.stop()
        await asyncio.wait_for(worker, 30)
        await world.close()


async def _ends(world: World, sid: str, n: int) -> bool:
    return sum(e.kind == "turn.finished" for e in await everything(world, sid)) >= n


async def _bad_input_leaves_data_untouched(world: World, agent: Agent, before: list[Entry]) -> None:
    ids = [SOURCE, "fork-1"]
    stored = {sid: await everything(world, sid) for sid in ids}
    source = agent.session(SOURCE)
    inside = next(e.seq for e in before if e.kind == "message")
    with pytest.raises(InvalidArgument, match="inside a turn; the nearest turn boundaries") as bad:
        await source.fork(at=encode_cursor(SOURCE, inside), id="never-1")
    first_end = next(e.seq for e in before if e.kind == "turn.finished")
    assert f"and seq {first_end} (cursor {encode_cursor(SOURCE, first_end)})" in str(bad.value)
    with pytest.raises(UnknownSession):
        await agent.session("no-such-session").fork(id="never-2")
    with pytest.raises(Conflict):
        await source.fork(id="fork-1")
    with pytest.raises(InvalidCursor):
        await source.fork(at=encode_cursor("fork-1", 1), id="never-3")
    for sid in ("never-1", "never-2", "never-3"):
        assert await world.read(sid) == []
    assert {sid: await everything(world, sid) for sid in ids} == stored


# -- what a fork copies (MemoryWorld) ------------------------------------------------


@tool(needs_approval=True)
def refund(id: str) -> str:
    """Refund an order."""
    return f"refunded {id}"


async def test_a_fork_leaves_out_fences_and_waiting_prompts_and_keeps_decided_calls() -> None:
    agent = Agent(
        ScriptedModel([{"tool": "refund", "input": {"id": "A"}}, "Refunded.", "Hello again."]),
        tools=[refund],
        world=MemoryWorld(),
    )
    s = agent.session("s")
    turn = s.prompt("refund A")
    await agent.work(until_idle=True, lease=5.0)
    (waiting,) = await s.pending_approvals()
    later = await s.prompt("and B?").accepted  # sent while the turn waits
    await s.approve(waiting.execution_id)
    await agent.work(until_idle=True, lease=5.0)
    await turn.result()
    w = agent.world
    log = await everything(w, "s")
    end = next(e.seq for e in log if e.kind == "turn.finished")
    assert end > decode_cursor("s", later.cursor)  # "and B?" waits at the first turn's end

    fork = await s.fork(at=encode_cursor("s", end), id="f")
    copied = await everything(w, "f")
    kinds = [e.kind for e in copied]
    assert "fence" not in kinds and kinds.count("prompt") == 1  # "and B?" is not copied
    assert [m.text for m in await fork.messages() if m.role == "user"] == ["refund A"]
    started = next(e for e in copied if e.kind == "turn.started")
    assert copied[started.data["prompt"] - 1].data["text"] == "refund A"
    assert await fork.pending_approvals() == []
    with pytest.raises(AlreadyDecided):  # the copied decision stands, as in the source
        await fork.deny(waiting.execution_id)
    assert await w.take_wake(lease=1.0) is None  # the fork starts idle: nothing to run
    # a retry of the same fork returns it; an empty fork at the start
    assert (await s.fork(at=encode_cursor("s", end), id="f")).id == "f"
    assert await everything(w, "f") == copied
    empty = await s.fork(at=encode_cursor("s", 0))
    assert [e.kind for e in await everything(w, empty.id)] == ["forked"]
    with pytest.raises(InvalidArgument, match="past the end"):
        await s.fork(at=encode_cursor("s", len(log) + 5))
    with pytest.raises(InvalidArgument, match="other than its source"):
        await s.fork(id="s")


BIG_PAGE = 'a page line with "quotes", é\n' * (33 * 1024 * 1024 // 30)  # over 32 MiB


@tool(idempotent=True)
def fetch(url: str) -> str:
    """Fetch a long page."""
    return BIG_PAGE


@pytest.mark.parametrize("encrypted", [False, True], ids=["sqlite", "encrypted"])
async def test_a_fork_of_a_session_holding_a_large_value_keeps_it_whole(
    encrypted: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 32 MiB tool result is copied whole into a fork (its one append), also
    through an EncryptedWorld, whose default limit (48 MiB) takes it."""
    monkeypatch.setenv("FXWORLD_ENCRYPTION_KEYS", "k:" + "A" * 43 + "=")
    world: World = fxworld.open_world(f"sqlite:///{tmp_path / 'w.db'}")
    if encrypted:
        world = fxworld.EncryptedWorld.from_env(world)
    agent = Agent(
        ScriptedModel([{"tool": "fetch", "input": {"url": "u"}}, "Read it."]),
        tools=[fetch],
        world=world,
    )
    try:
        s = agent.session("s")
        turn = s.prompt("read the page")
        await agent.work(until_idle=True, lease=30.0)
        assert await turn.result() == "Read it."
        fork = await s.fork(id="f")
        (done,) = [e for e in await everything(world, "f") if e.kind == "tool.finished"]
        assert done.data["output"] == BIG_PAGE
        assert [m.text for m in await fork.messages() if m.role == "tool"] == [BIG_PAGE]
    finally:
        await world.close()
