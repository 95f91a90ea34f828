"""WorldSaver's retention frees storage: ``prune(strategy="keep_latest")`` and
``delete_for_runs`` leave fewer rows and bytes in SQLite and PostgreSQL (counted
with SQL, beside fxworld), never rewrite a thread that is being written, and lose
nothing kept when the process stops half way. ``copy_thread`` keeps early writes."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import asyncpg
import pytest
from langgraph.graph import END, START, StateGraph

from fxworld import MemoryWorld
from fxworld.integrations.langgraph import WorldSaver, thread_session
from fxworld.integrations.langgraph_log import staging_session
from tests.integrations.conftest import open_test_world, world_url_for
from tests.integrations.test_langgraph_saver import Count, checkpoint_named, config, counter


async def stored(url: str, sid: str) -> tuple[int, int]:
    """The rows (entries and idempotency keys) and bytes a session takes in the
    SQLite or PostgreSQL world at ``url``."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        with sqlite3.connect(parts.path) as db:
            entries = db.execute(
                "SELECT count(*), coalesce(sum(length(data)), 0) FROM fx_entries "
                "WHERE session_id = ?",
                (sid,),
            ).fetchone()
            keys = db.execute(
                "SELECT count(*), coalesce(sum(length(key)), 0) FROM fx_keys WHERE session_id = ?",
                (sid,),
            ).fetchone()
        return entries[0] + keys[0], entries[1] + keys[1]
    schema = '"fxworld_' + parse_qs(parts.query)["namespace"][0] + '"'
    conn = await asyncpg.connect(url.split("?")[0])
    try:
        entries = await conn.fetchrow(
            "SELECT count(*), coalesce(sum(octet_length(coalesce(raw, data::text))), 0) "
            f"FROM {schema}.entries WHERE session_id = $1",
            sid,
        )
        keys = await conn.fetchrow(
            "SELECT count(*), coalesce(sum(octet_length(key)), 0) "
            f"FROM {schema}.keys WHERE session_id = $1",
            sid,
        )
    finally:
        await conn.close()
    return entries[0] + keys[0], entries[1] + keys[1]


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_world_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return world_url_for(request.param, request, tmp_path)


async def test_prune_keep_latest_frees_the_rows_and_bytes_of_what_it_removes(
    sql_world_url: str,
) -> None:
    world = open_test_world(sql_world_url)
    try:
        saver = WorldSaver(world, quiet=0)
        app = counter(20).compile(checkpointer=saver)
        await app.ainvoke({"n": 0}, config("long"))
        await app.ainvoke({"n": 0}, config("other"))
        long, other = thread_session("long"), thread_session("other")
        rows, size = await stored(sql_world_url, long)
        untouched = await stored(sql_world_url, other)
        await saver.aprune(["long"], strategy="keep_latest")
        rows_after, size_after = await stored(sql_world_url, long)
        assert rows > 40 and rows_after <= 4  # the latest checkpoint, its values, the mark
        assert size_after < size // 10
        assert await stored(sql_world_url, staging_session(long)) == (0, 0)
        assert await stored(sql_world_url, other) == untouched
        assert [t.checkpoint["channel_values"]["n"] async for t in saver.alist(config("long"))] == [
            20
        ]
        assert await app.ainvoke({"n": 17}, config("long")) == {"n": 20}  # it goes on
    finally:
        await world.close()


async def test_delete_for_runs_frees_the_rows_and_bytes_of_those_runs(
    sql_world_url: str,
) -> None:
    world = open_test_world(sql_world_url)
    try:
        saver = WorldSaver(world, quiet=0)
        app = counter(10).compile(checkpointer=saver)
        first, second = str(uuid.uuid4()), str(uuid.uuid4())
        await app.ainvoke({"n": 0}, config("t", run_id=first))
        sid = thread_session("t")
        one_run = await stored(sql_world_url, sid)
        await app.ainvoke({"n": 5}, config("t", run_id=second))
        both = await stored(sql_world_url, sid)
        await saver.adelete_for_runs([first])
        rows, size = await stored(sql_world_url, sid)
        assert rows < both[0] - one_run[0] and size < both[1] - one_run[1]  # the second's
        runs = {t.metadata["run_id"] async for t in saver.alist(config("t"))}
        assert runs == {second}
        assert (await app.aget_state(config("t"))).values == {"n": 10}
    finally:
        await world.close()


class WrittenWhileDeleting:
    """``inner`` on which another saver puts a checkpoint on thread ``t`` just
    before each ``delete_if_idle``: a thread being written while it is pruned."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.writer = WorldSaver(inner)

    async def delete_if_idle(self, session_id: str, *, last: int) -> bool:
        latest = await self.writer.aget_tuple(config("t"))
        assert latest is not None
        await self.writer.aput(latest.config, checkpoint_named("racing"), {"step": 99}, {})
        return bool(await self.inner.delete_if_idle(session_id, last=last))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_thread_written_while_it_is_pruned_is_not_rewritten() -> None:
    inner = MemoryWorld()
    saver = WorldSaver(WrittenWhileDeleting(inner), quiet=0)  # type: ignore[arg-type]
    await counter(5).compile(checkpointer=saver).ainvoke({"n": 0}, config("t"))
    before = await inner.read(thread_session("t"))
    await saver.aprune(["t"], strategy="keep_latest")
    after = await inner.read(thread_session("t"))
    assert after[: len(before)] == before  # nothing was deleted
    assert after[-1].kind == "lg.dropped"  # the old ones are hidden instead
    listed = [t.checkpoint["id"] async for t in saver.alist(config("t"))]
    assert listed[0] == "1ef-racing" and len(listed) == 2  # and the latest before it
    assert await inner.read(staging_session(thread_session("t"))) == []


class StopsAfterDeleting:
    """``inner`` whose appends fail once a thread has been deleted by
    ``delete_if_idle``: a process that stops between a compaction's delete and its
    write-back."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.deleted = False

    async def delete_if_idle(self, session_id: str, *, last: int) -> bool:
        self.deleted = bool(await self.inner.delete_if_idle(session_id, last=last))
        return self.deleted

    async def append(self, session_id: str, entries: Any, **kw: Any) -> int:
        if self.deleted:
            raise RuntimeError("the process stopped here")
        return int(await self.inner.append(session_id, entries, **kw))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_prune_stopped_between_delete_and_write_back_loses_nothing_kept() -> None:
    inner = MemoryWorld()
    stopping = WorldSaver(StopsAfterDeleting(inner), quiet=0)  # type: ignore[arg-type]
    await counter(5).compile(checkpointer=stopping).ainvoke({"n": 0}, config("t"))
    with pytest.raises(RuntimeError, match="stopped"):
        await stopping.aprune(["t"], strategy="keep_latest")
    assert [e.kind for e in await inner.read(thread_session("t"))] == []  # deleted
    saver = WorldSaver(inner)  # another process reads the thread
    app = counter(7).compile(checkpointer=saver)
    assert (await app.aget_state(config("t"))).values == {"n": 5}
    assert len([t async for t in saver.alist(config("t"))]) == 1
    assert await inner.read(staging_session(thread_session("t"))) == []
    assert await app.ainvoke({"n": 5}, config("t")) == {"n": 7}


async def test_a_copy_keeps_the_writes_that_landed_before_their_checkpoint() -> None:
    saver = WorldSaver(MemoryWorld())
    first = await saver.aput(config("t", checkpoint_ns=""), checkpoint_named("a"), {"step": 0}, {})
    second = config("t", checkpoint_ns="", checkpoint_id="1ef-b")
    await saver.aput_writes(second, [("n", 2)], "task-2")  # before its checkpoint
    await saver.aput_writes(first, [("n", 1)], "task-1")
    await saver.aput(first, checkpoint_named("b"), {"step": 1}, {})
    await saver.acopy_thread("t", "copy")
    copied = [t.pending_writes async for t in saver.alist(config("copy"))]
    assert copied == [[("task-2", "n", 2)], [("task-1", "n", 1)]]


async def test_a_run_goes_on_while_delete_for_runs_removes_an_older_run_of_its_thread(
    sql_world_url: str,
) -> None:
    world = open_test_world(sql_world_url)
    try:
        saver = WorldSaver(world)
        old, live = str(uuid.uuid4()), str(uuid.uuid4())
        await counter(3).compile(checkpointer=saver).ainvoke({"n": 0}, config("t", run_id=old))
        inside, release = asyncio.Event(), asyncio.Event()

        async def slow(state: Count) -> dict[str, int]:
            inside.set()
            await release.wait()
            return {"n": state["n"] + 10}

        graph = StateGraph(Count)
        graph.add_node("slow", slow)
        graph.add_node("step", lambda s: {"n": s["n"] + 1})
        graph.add_edge(START, "slow")
        graph.add_edge("slow", "step")
        graph.add_edge("step", END)
        running = asyncio.create_task(
            graph.compile(checkpointer=saver).ainvoke({"n": 0}, config("t", run_id=live))
        )
        await inside.wait()  # the live run holds the thread's fence, inside a node
        await WorldSaver(world).adelete_for_runs([old])  # another process's saver
        release.set()
        assert await running == {"n": 11}  # not ThreadTakenOver
        runs = {t.metadata["run_id"] async for t in saver.alist(config("t"))}
        assert runs == {live}
    finally:
        await world.close()
