"""``copy_threads``: threads written by LangGraph's own PostgreSQL savers (async and
sync) and by langgraph-checkpoint-redis, on real servers, copied into a WorldSaver on
SQLite and PostgreSQL, resume there: a pending interrupt is answered, a finished
thread runs another turn with the incumbents' string versions, and the history reads
as it did in the source."""

from __future__ import annotations

import asyncio
import operator
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import asyncpg
import pytest
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.redis.aio import AsyncRedisSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from fxworld import World, open_world
from fxworld.cli import main
from fxworld.integrations.langgraph import WorldSaver, copy_threads, thread_session
from tests.integrations.conftest import open_test_world, world_url_for
from tests.support.redis_server import start_redis_with_modules


class Items(TypedDict):
    items: Annotated[list[str], operator.add]


def _approve(state: Items) -> Items:
    return {"items": [str(interrupt("ship it?"))]}


def graph() -> StateGraph[Items]:
    g = StateGraph(Items)
    g.add_node("a", lambda s: {"items": ["a"]})
    g.add_node("approve", _approve)
    g.add_node("b", lambda s: {"items": ["b"]})
    g.add_edge(START, "a")
    g.add_edge("a", "approve")
    g.add_edge("approve", "b")
    g.add_edge("b", END)
    return g


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


@pytest.fixture
async def incumbent_url(postgres_server: Any) -> str:
    """A fresh schema of the test server, as a URL whose connections use it."""
    schema = f"lg_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(postgres_server.url)
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
    finally:
        await conn.close()
    return f"{postgres_server.url}?options=-csearch_path%3D{schema}"


@pytest.fixture
async def incumbent(incumbent_url: str) -> AsyncIterator[AsyncPostgresSaver]:
    async with AsyncPostgresSaver.from_conn_string(incumbent_url) as saver:
        await saver.setup()
        yield saver


@pytest.fixture(params=["sqlite", "postgresql"])
async def target(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[World, WorldSaver]]:
    world = open_test_world(world_url_for(request.param, request, tmp_path))
    await world.setup()
    try:
        yield world, WorldSaver(world)
    finally:
        await world.close()


async def test_a_copied_thread_answers_its_pending_interrupt_and_runs_on(
    incumbent: AsyncPostgresSaver, target: tuple[World, WorldSaver]
) -> None:
    old = graph().compile(checkpointer=incumbent)
    await old.ainvoke({"items": []}, config("waiting"))  # stops at the interrupt
    await old.ainvoke({"items": []}, config("done"))
    await old.ainvoke(Command(resume="yes"), config("done"))  # a whole turn, finished
    before = [s async for s in old.aget_state_history(config("done"))]

    world, saver = target
    copied = await copy_threads(incumbent, saver)
    new = graph().compile(checkpointer=saver)

    waiting = await new.aget_state(config("waiting"))
    assert waiting.next == ("approve",)
    assert [i.value for i in waiting.interrupts] == ["ship it?"]
    answered = await new.ainvoke(Command(resume="ok"), config("waiting"))
    assert answered["items"] == ["a", "ok", "b"]

    after = [s async for s in new.aget_state_history(config("done"))]
    assert [(s.values, s.next, s.config["configurable"]["checkpoint_id"]) for s in after] == [
        (s.values, s.next, s.config["configurable"]["checkpoint_id"]) for s in before
    ]
    assert copied == len(before) + len([s async for s in old.aget_state_history(config("waiting"))])
    # Another turn on the copy: the incumbent's string versions go on.
    await new.ainvoke({"items": ["again"]}, config("done"))
    await new.ainvoke(Command(resume="twice"), config("done"))
    final = await new.aget_state(config("done"))
    assert final.values["items"] == ["a", "yes", "b", "again", "a", "twice", "b"]

    # Copying again brings nothing twice (W6 keys): the logs do not grow.
    sid = thread_session("waiting")
    length = len(await world.read(sid, 0, limit=10_000))
    await copy_threads(incumbent, saver, thread_ids=["waiting"])
    assert len(await world.read(sid, 0, limit=10_000)) == length


@pytest.fixture
def sync_incumbent(incumbent_url: str) -> Iterator[PostgresSaver]:
    with PostgresSaver.from_conn_string(incumbent_url) as saver:
        saver.setup()
        yield saver


async def test_one_thread_is_copied_from_the_sync_saver(
    sync_incumbent: PostgresSaver, target: tuple[World, WorldSaver]
) -> None:
    old = graph().compile(checkpointer=sync_incumbent)
    old.invoke({"items": []}, config("one"))
    old.invoke({"items": []}, config("other"))

    _, saver = target
    await copy_threads(sync_incumbent, saver, thread_ids=["one", "missing"])
    new = graph().compile(checkpointer=saver)
    assert (await new.aget_state(config("one"))).next == ("approve",)
    assert (await new.aget_state(config("other"))).values == {}  # not asked for
    assert (await new.ainvoke(Command(resume="y"), config("one")))["items"] == ["a", "y", "b"]


async def test_thread_ids_must_be_a_sequence_of_strings(
    incumbent: AsyncPostgresSaver, target: tuple[World, WorldSaver]
) -> None:
    await graph().compile(checkpointer=incumbent).ainvoke({"items": []}, config("t"))
    world, saver = target
    with pytest.raises(TypeError, match="sequence of thread id strings"):
        await copy_threads(incumbent, saver, thread_ids="t")  # type: ignore[arg-type]
    assert await world.read(thread_session("t")) == []


@pytest.fixture(scope="module")
def redis_with_modules() -> Iterator[str]:
    """A local Redis with RediSearch and RedisJSON, which langgraph-checkpoint-redis
    needs (apt's redis-server has neither)."""
    server = start_redis_with_modules(appendfsync="no")
    try:
        yield server.url
    finally:
        server.stop()


async def test_threads_are_copied_from_langgraph_checkpoint_redis(
    redis_with_modules: str, target: tuple[World, WorldSaver]
) -> None:
    async with AsyncRedisSaver.from_conn_string(redis_with_modules) as redis_saver:
        await redis_saver.asetup()
        old = graph().compile(checkpointer=redis_saver)
        thread = f"r-{uuid.uuid4().hex[:8]}"  # the server is shared by this module's tests
        await old.ainvoke({"items": []}, config(thread))
        before = [s async for s in old.aget_state_history(config(thread))]

        _, saver = target
        assert await copy_threads(redis_saver, saver, thread_ids=[thread]) == len(before)
    new = graph().compile(checkpointer=saver)
    assert [s.values async for s in new.aget_state_history(config(thread))] == [
        s.values for s in before
    ]
    assert (await new.ainvoke(Command(resume="r"), config(thread)))["items"] == ["a", "r", "b"]


def test_the_cli_copies_every_thread_and_refuses_an_unknown_source(
    sync_incumbent: PostgresSaver, incumbent_url: str, tmp_path: Path, capsys: Any
) -> None:
    old = graph().compile(checkpointer=sync_incumbent)
    for thread in ("x", "y"):
        old.invoke({"items": []}, config(thread))
    url = f"sqlite:///{tmp_path}/moved.db"

    assert main(["langgraph-copy", "--from", incumbent_url, "--world", url]) == 0
    assert "langgraph-copy: 6 checkpoints copied" in capsys.readouterr().out

    async def resume() -> list[list[str]]:
        world = open_world(url)
        try:
            new = graph().compile(checkpointer=WorldSaver(world))
            return [(await new.ainvoke(Command(resume=t), config(t)))["items"] for t in "xy"]
        finally:
            await world.close()

    assert asyncio.run(resume()) == [["a", "x", "b"], ["a", "y", "b"]]
    assert main(["langgraph-copy", "--from", "mysql://u:pw@h/db", "--world", url]) == 2
    err = capsys.readouterr().err
    assert "use a postgresql:// URL" in err and "pw" not in err
