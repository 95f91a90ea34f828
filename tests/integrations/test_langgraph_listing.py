"""WorldSaver's listings: ``list`` honours a ``checkpoint_id`` in its config, as
LangGraph's own savers do, and ``list(None)`` finds every thread, however many
runs took it over before its first checkpoint."""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph

from fxworld import MemoryWorld
from fxworld.integrations.langgraph import WorldSaver, thread_session


class Count(TypedDict):
    n: int


def counter(limit: int) -> Any:
    graph = StateGraph(Count)
    graph.add_node("step", lambda s: {"n": s["n"] + 1})
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda s: "step" if s["n"] < limit else END)
    return graph


def config(thread: str, **more: Any) -> Any:
    return {"configurable": {"thread_id": thread, **more}}


async def test_list_with_a_checkpoint_id_gives_that_checkpoint_only() -> None:
    saver = WorldSaver(MemoryWorld())
    await counter(5).compile(checkpointer=saver).ainvoke({"n": 0}, config("t"))
    every = [t async for t in saver.alist(config("t"))]
    middle = every[3].config["configurable"]["checkpoint_id"]
    found = [t async for t in saver.alist(config("t", checkpoint_ns="", checkpoint_id=middle))]
    assert [t.config["configurable"]["checkpoint_id"] for t in found] == [middle]
    assert [t async for t in saver.alist(config("t", checkpoint_id="no-such"))] == []


async def test_a_thread_taken_over_many_times_before_its_first_checkpoint_is_listed() -> None:
    world = MemoryWorld()
    for _ in range(12):  # runs that took the thread and wrote nothing
        await world.acquire(thread_session("late"))
    saver = WorldSaver(world)
    await counter(2).compile(checkpointer=saver).ainvoke({"n": 0}, config("late"))
    await counter(2).compile(checkpointer=saver).ainvoke({"n": 0}, config("early"))
    threads = {t.config["configurable"]["thread_id"] async for t in saver.alist(None)}
    assert threads == {"late", "early"}


class CountingSerde(JsonPlusSerializer):
    """LangGraph's serializer, counting what it decodes."""

    loads = 0

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.loads += 1
        return super().loads_typed(data)


async def test_list_with_a_filter_decodes_only_the_metadata_of_what_it_leaves_out() -> None:
    serde = CountingSerde()
    saver = WorldSaver(MemoryWorld(), serde=serde)
    await counter(30).compile(checkpointer=saver).ainvoke({"n": 0}, config("t"))
    serde.loads = 0
    found = [t async for t in saver.alist(config("t"), filter={"step": 3})]
    assert [t.metadata["step"] for t in found] == [3]
    assert serde.loads <= 32 + 10  # each checkpoint's metadata, and the one found whole
