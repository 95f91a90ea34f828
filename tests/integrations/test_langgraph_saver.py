"""WorldSaver in one process: reads that cost what the latest needs, time travel
as LangGraph documents it, sync use, and a thread taken over by another saver."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import RunControl, Runtime

from fxworld import MemoryWorld
from fxworld.integrations.langgraph import ThreadTakenOver, WorldSaver, thread_session
from tests.integrations.reads import CountingAppends, CountingReads


class Count(TypedDict):
    n: int


def counter(limit: int) -> StateGraph[Count]:
    graph = StateGraph(Count)
    graph.add_node("step", lambda s: {"n": s["n"] + 1})
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda s: "step" if s["n"] < limit else END)
    return graph


def config(thread: str, **more: Any) -> Any:
    return {"configurable": {"thread_id": thread, **more}}


async def test_get_tuple_of_the_latest_reads_one_page_however_long_the_thread() -> None:
    world = CountingReads(MemoryWorld())
    saver = WorldSaver(world)  # type: ignore[arg-type]
    app = counter(300).compile(checkpointer=saver)
    await app.ainvoke({"n": 0}, {**config("long"), "recursion_limit": 1000})
    world.entries_read = world.reads = 0
    latest = await saver.aget_tuple(config("long"))
    assert latest is not None and latest.checkpoint["channel_values"]["n"] == 300
    assert world.reads == 1 and world.entries_read <= 8


async def test_list_with_a_limit_reads_from_the_end_only() -> None:
    world = CountingReads(MemoryWorld())
    saver = WorldSaver(world)  # type: ignore[arg-type]
    await (
        counter(200)
        .compile(checkpointer=saver)
        .ainvoke({"n": 0}, {**config("long"), "recursion_limit": 1000})
    )
    world.entries_read = 0
    found = [t async for t in saver.alist(config("long"), limit=2)]
    assert [t.checkpoint["channel_values"]["n"] for t in found] == [200, 199]
    assert world.entries_read <= 24  # a page and the next, of a 1,000-entry log


async def test_time_travel_from_a_named_checkpoint_branches_and_keeps_the_history() -> None:
    saver = WorldSaver(MemoryWorld())
    app = counter(4).compile(checkpointer=saver)
    await app.ainvoke({"n": 0}, config("t"))
    states = [s async for s in app.aget_state_history(config("t"))]
    older = next(s for s in states if s.values.get("n") == 2)
    again = await app.ainvoke(None, older.config)
    assert again == {"n": 4}
    after = [s async for s in app.aget_state_history(config("t"))]
    assert len(after) > len(states)  # the old branch is still there
    assert after[0].parent_config is not None
    ids = {s.config["configurable"]["checkpoint_id"] for s in after}
    assert {s.config["configurable"]["checkpoint_id"] for s in states} <= ids


def test_sync_invoke_runs_on_the_savers_own_loop(tmp_path: Any) -> None:
    from fxworld import SqliteWorld

    saver = WorldSaver(SqliteWorld(str(tmp_path / "w.db")))
    app = counter(3).compile(checkpointer=saver)
    assert app.invoke({"n": 0}, config("sync")) == {"n": 3}
    assert app.get_state(config("sync")).values == {"n": 3}
    assert len(list(saver.list(config("sync")))) == 5


async def test_a_run_taken_over_by_another_saver_is_refused_and_writes_nothing() -> None:
    world = MemoryWorld()
    first, second = WorldSaver(world), WorldSaver(world)
    run = Runtime(control=RunControl())  # the writes of one run (as LangGraph passes it)
    stored = await first.aput(
        config("t", checkpoint_ns="", run=run),
        checkpoint_named("a"),
        {"source": "input", "step": -1},
        {},
    )
    stored["configurable"]["run"] = run
    await counter(2).compile(checkpointer=second).ainvoke({"n": 0}, config("t"))
    before = len(await world.read(thread_session("t")))
    with pytest.raises(ThreadTakenOver, match="taken over"):
        await first.aput(stored, checkpoint_named("b"), {}, {})
    with pytest.raises(ThreadTakenOver):
        await first.aput_writes(stored, [("n", 1)], "task")
    assert len(await world.read(thread_session("t"))) == before


async def test_a_superstep_is_one_append_its_writes_going_with_the_next_checkpoint() -> None:
    world = CountingAppends(MemoryWorld())
    saver = WorldSaver(world)  # type: ignore[arg-type]
    app = counter(40).compile(checkpointer=saver)
    await app.ainvoke({"n": 0}, config("t"), durability="sync")
    tuples = [t async for t in saver.alist(config("t"))]
    assert len(tuples) == 42  # the input, then one checkpoint per superstep
    assert world.appends <= len(tuples) + 2
    # every checkpoint but the latest kept the writes of the task run from it
    steps = [t for t in tuples[1:] if t.checkpoint["channel_values"].get("n", 0) > 0]
    assert len(steps) == 39 and all(
        ("n", t.checkpoint["channel_values"]["n"] + 1) in [(c, v) for _, c, v in t.pending_writes]
        for t in steps
    )
    assert (await app.aget_state(config("t"))).values == {"n": 40}


async def test_writes_joined_with_a_checkpoint_are_refused_with_it_when_taken_over() -> None:
    world = CountingAppends(MemoryWorld())
    first, second = WorldSaver(world), WorldSaver(world)  # type: ignore[arg-type]
    run = Runtime(control=RunControl())  # the writes of one run (as LangGraph passes it)
    stored = await first.aput(
        config("t", checkpoint_ns="", run=run),
        checkpoint_named("a"),
        {"source": "input", "step": -1},
        {},
    )
    stored["configurable"]["run"] = run
    await counter(2).compile(checkpointer=second).ainvoke({"n": 0}, config("t"))
    before, appends = len(await world.read(thread_session("t"))), world.appends
    refused = await asyncio.gather(
        first.aput_writes(stored, [("n", 1)], "task"),
        first.aput(stored, checkpoint_named("b"), {}, {}),
        return_exceptions=True,
    )
    assert [type(e) for e in refused] == [ThreadTakenOver, ThreadTakenOver]
    assert world.appends == appends + 1  # one append, refused as a whole
    assert len(await world.read(thread_session("t"))) == before


def checkpoint_named(name: str) -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    return {**empty_checkpoint(), "id": f"1ef-{name}"}


class SlowCheckpoints:
    """``inner`` whose appends of a checkpoint take a while: LangGraph (durability
    "async") saves a task's writes while the put of their checkpoint is in flight."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.putting = asyncio.Event()  # a checkpoint's append is in flight

    async def append(self, session_id: str, entries: Any, **kw: Any) -> int:
        if entries[0].kind == "lg.checkpoint":
            self.putting.set()
            await asyncio.sleep(0.2)
        return int(await self.inner.append(session_id, entries, **kw))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_writes_saved_while_their_checkpoint_is_being_put_are_not_lost() -> None:
    slow = SlowCheckpoints(MemoryWorld())
    saver = WorldSaver(slow)  # type: ignore[arg-type]
    stored = config("t", checkpoint_ns="", checkpoint_id="1ef-a")
    put = asyncio.create_task(
        saver.aput(config("t", checkpoint_ns=""), checkpoint_named("a"), {"step": 0}, {})
    )
    await asyncio.wait_for(slow.putting.wait(), 10)  # the put is in flight
    await saver.aput_writes(stored, [("n", 1)], "task-1")
    await put
    latest = await saver.aget_tuple(config("t"))
    assert latest is not None and latest.pending_writes == [("task-1", "n", 1)]


async def test_writes_saved_before_their_checkpoint_is_put_are_not_lost() -> None:
    world = MemoryWorld()
    saver = WorldSaver(world)
    first = await saver.aput(config("t", checkpoint_ns=""), checkpoint_named("a"), {"step": 0}, {})
    second = config("t", checkpoint_ns="", checkpoint_id="1ef-b")
    await saver.aput_writes(second, [("n", 2)], "task-2")  # before its checkpoint
    await saver.aput_writes(first, [("n", 1)], "task-1")
    await saver.aput(first, checkpoint_named("b"), {"step": 1}, {})
    latest = await saver.aget_tuple(config("t"))
    assert latest is not None and latest.pending_writes == [("task-2", "n", 2)]
    named = await saver.aget_tuple(first)
    assert named is not None and named.pending_writes == [("task-1", "n", 1)]
    listed = [t.pending_writes async for t in saver.alist(config("t"))]
    assert listed == [[("task-2", "n", 2)], [("task-1", "n", 1)]]


class HeldWrites:
    """``inner`` whose appends of writes wait for :attr:`release`, and whose
    appends of a checkpoint wait until the held writes have landed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.writing, self.release = asyncio.Event(), asyncio.Event()
        self.putting, self.landed = asyncio.Event(), asyncio.Event()

    async def append(self, session_id: str, entries: Any, **kw: Any) -> int:
        if entries[0].kind == "lg.writes":
            self.writing.set()
            await self.release.wait()
            seq = int(await self.inner.append(session_id, entries, **kw))
            self.landed.set()
            return seq
        if entries[0].kind == "lg.checkpoint" and self.writing.is_set():
            self.putting.set()
            await self.landed.wait()
        return int(await self.inner.append(session_id, entries, **kw))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_writes_under_way_when_their_checkpoint_is_put_are_not_lost() -> None:
    world = HeldWrites(MemoryWorld())
    saver = WorldSaver(world)  # type: ignore[arg-type]
    first = await saver.aput(config("t", checkpoint_ns=""), checkpoint_named("a"), {"step": 0}, {})
    second = config("t", checkpoint_ns="", checkpoint_id="1ef-b")
    write = asyncio.create_task(saver.aput_writes(second, [("n", 2)], "task-2"))
    await world.writing.wait()  # the write is on its way to the world
    put = asyncio.create_task(saver.aput(first, checkpoint_named("b"), {"step": 1}, {}))
    try:  # the put reaches the world (and waits there for the write), or waits here
        await asyncio.wait_for(world.putting.wait(), 0.2)
    except TimeoutError:
        pass
    world.release.set()  # the write lands before the checkpoint
    await asyncio.gather(write, put)
    latest = await saver.aget_tuple(config("t"))
    assert latest is not None and latest.pending_writes == [("task-2", "n", 2)]
