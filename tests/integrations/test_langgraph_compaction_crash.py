"""Issue 43, item 17: a compaction SIGKILLed between its thread delete and its
write-back ends, at the next access of the thread by any path, in the compacted
thread: ``delete_for_runs`` finds the thread, the run it deletes stays deleted,
``list(None)`` lists it and ``copy_thread`` copies it. Killed after its write-back
and before its staged set was deleted, it leaves nothing that comes back: not
after a delete of the thread by another path, not through a listing, a copy or a
later compaction (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from pathlib import Path

import pytest

import fxworld
from fxworld.integrations.langgraph import WorldSaver, thread_session
from fxworld.integrations.langgraph_log import staging_session
from fxworld.testing import moved_clock
from tests.integrations.conftest import open_test_world, world_url_for
from tests.integrations.test_langgraph_saver import config

CHILD = '''
import asyncio, os, signal, sys
from typing import Any
from fxworld import open_world
from fxworld.integrations.langgraph import WorldSaver
from fxworld.integrations.langgraph_log import is_thread_session
from tests.integrations.test_langgraph_saver import config, counter


class Killed:
    """The world, this process SIGKILLed once a compaction deleted a thread
    (``after-delete``), staged what it keeps (``after-stage``) or wrote it back
    (``after-write-back``)."""

    def __init__(self, inner: Any, point: str) -> None:
        self.inner, self.point, self.deleted = inner, point, False

    async def delete_if_idle(self, session_id: str, *, last: int) -> bool:
        deleted = bool(await self.inner.delete_if_idle(session_id, last=last))
        if deleted and is_thread_session(session_id) and self.point == "after-delete":
            os.kill(os.getpid(), signal.SIGKILL)  # before the write-back
        self.deleted = self.deleted or (deleted and is_thread_session(session_id))
        return deleted

    async def append(self, session_id: str, entries: Any, **kw: Any) -> int:
        seq = int(await self.inner.append(session_id, entries, **kw))
        if entries[0].kind == "lg.staged" and self.point == "after-stage":
            os.kill(os.getpid(), signal.SIGKILL)  # before the delete
        written_back = self.deleted and is_thread_session(session_id)
        if written_back and entries[0].kind == "lg.checkpoint" and self.point == "after-write-back":
            os.kill(os.getpid(), signal.SIGKILL)  # before the staged set is deleted
        return seq

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def main(url: str, point: str, runs: list[str]) -> None:
    world = open_world(url)
    saver = WorldSaver(Killed(world, point), quiet=0)  # type: ignore[arg-type]
    app = counter(3).compile(checkpointer=saver)
    for run in runs:
        await app.ainvoke({"n": 0}, config("t", run_id=run))
    await saver.adelete_for_runs([runs[0]])


asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
'''


async def _killed_compaction(url: str, point: str) -> list[str]:
    """Three runs of thread ``t``, then ``delete_for_runs`` of the first, in a process
    SIGKILLed at ``point``; the runs' ids."""
    runs = [str(uuid.uuid4()) for _ in range(3)]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, url, point, *runs, env=env, cwd=os.getcwd()
    )
    assert await asyncio.wait_for(child.wait(), 120) == -signal.SIGKILL
    return runs


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_world_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return world_url_for(request.param, request, tmp_path)


async def test_a_compaction_killed_after_its_delete_is_rolled_forward_at_the_next_access(
    sql_world_url: str,
) -> None:
    runs = await _killed_compaction(sql_world_url, "after-delete")
    world = open_test_world(sql_world_url)
    try:
        assert await world.read(thread_session("t")) == []  # the thread was deleted
        saver = WorldSaver(world, quiet=0)
        await saver.adelete_for_runs([runs[1]])  # finds the thread all the same
        listed = {t.metadata["run_id"] async for t in saver.alist(config("t"))}
        assert listed == {runs[2]}  # neither the first run nor the second comes back
        threads = {t.config["configurable"]["thread_id"] async for t in saver.alist(None)}
        assert threads == {"t"}
        await saver.acopy_thread("t", "copy")
        copied = {t.metadata["run_id"] async for t in saver.alist(config("copy"))}
        assert copied == {runs[2]}
    finally:
        await world.close()


async def test_a_compaction_killed_after_staging_leaves_nothing_a_later_delete_brings_back(
    sql_world_url: str,
) -> None:
    runs = await _killed_compaction(sql_world_url, "after-stage")
    world = open_test_world(sql_world_url)
    try:
        saver = WorldSaver(world, quiet=0)
        listed = {t.metadata["run_id"] async for t in saver.alist(config("t"))}
        assert listed == set(runs)  # the old thread, as it was
        assert await world.read(staging_session(thread_session("t"))) == []  # discarded
        await world.delete(thread_session("t"))  # deleted by another path
        assert [t async for t in saver.alist(config("t"))] == []  # nothing comes back
        assert await saver.aget_tuple(config("t")) is None
    finally:
        await world.close()


async def test_a_compaction_killed_after_its_write_back_leaves_nothing_a_later_delete_brings_back(
    sql_world_url: str,
) -> None:
    runs = await _killed_compaction(sql_world_url, "after-write-back")
    world = open_test_world(sql_world_url)
    try:
        saver = WorldSaver(world, quiet=0)
        listed = {t.metadata["run_id"] async for t in saver.alist(config("t"))}
        assert listed == {runs[1], runs[2]}  # the new thread
        assert await world.read(staging_session(thread_session("t")))  # left behind
        await world.delete(thread_session("t"))  # deleted by another path
        assert [t async for t in saver.alist(config("t"))] == []  # nothing comes back
        assert await saver.aget_tuple(config("t")) is None
        assert [t async for t in saver.alist(None)] == []
        assert await world.read(staging_session(thread_session("t"))) == []  # gone
    finally:
        await world.close()


async def test_a_stale_staged_set_is_dropped_by_a_listing_and_never_copied_or_compacted_back(
    sql_world_url: str,
) -> None:
    runs = await _killed_compaction(sql_world_url, "after-write-back")
    world = open_test_world(sql_world_url)
    try:
        saver = WorldSaver(world, quiet=0)
        threads = {t.config["configurable"]["thread_id"] async for t in saver.alist(None)}
        assert threads == {"t"}
        assert await world.read(staging_session(thread_session("t"))) == []  # dropped
        await saver.acopy_thread("t", "copy")
        await saver.aprune(["t"], strategy="keep_latest")
        await saver.adelete_for_runs([runs[2]])
        for thread in ("t", "copy"):
            await world.delete(thread_session(thread))
            assert await saver.aget_tuple(config(thread)) is None  # nothing comes back
        assert [t async for t in saver.alist(None)] == []
    finally:
        await world.close()


@pytest.mark.parametrize("other_path", ["delete_thread", "fxworld.prune"])
async def test_a_compaction_killed_after_staging_then_deleted_by_another_path_stays_deleted(
    sql_world_url: str, other_path: str
) -> None:
    await _killed_compaction(sql_world_url, "after-stage")
    world = open_test_world(sql_world_url)
    try:
        if other_path == "delete_thread":
            await WorldSaver(world, quiet=0).adelete_thread("t")
        else:
            with moved_clock() as clock:
                clock.advance(3600)
                await fxworld.prune(world, idle_for="30m")
        saver = WorldSaver(world, quiet=0)
        assert await saver.aget_tuple(config("t")) is None  # nothing comes back
        assert [t async for t in saver.alist(None)] == []
        assert await world.read(staging_session(thread_session("t"))) == []  # nothing lingers
    finally:
        await world.close()
