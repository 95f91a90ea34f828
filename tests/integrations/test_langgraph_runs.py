"""One writer per run, not per process: two concurrent runs of one thread never
fork, whether they share a saver, a process or neither; an edit outside a run
(``update_state``) from any replica lands on a thread that is not being run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from fxworld import MemoryWorld
from fxworld.integrations.langgraph import ThreadTakenOver, WorldSaver
from tests.integrations.conftest import world_url_for
from tests.integrations.lg_procs import LOOP_STEPS
from tests.integrations.test_langgraph_processes import history, spawn, unreachable, wait_for


class Count(TypedDict):
    n: int


def gated(inside: dict[str, asyncio.Event], go: dict[str, asyncio.Event]) -> StateGraph[Count]:
    """A 3-step loop whose step from ``n == 1`` waits, per run (its config's
    ``run`` tag), until that run is let go."""

    async def step(state: Count, config: RunnableConfig) -> Count:
        if state["n"] == 1:
            name = config["configurable"]["run"]
            inside[name].set()
            await go[name].wait()
        return {"n": state["n"] + 1}

    graph = StateGraph(Count)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda s: "step" if s["n"] < 3 else END)
    return graph


@pytest.mark.parametrize("savers", ["one saver", "two savers"])
async def test_two_concurrent_runs_of_one_thread_never_fork(savers: str) -> None:
    world = MemoryWorld()
    first = WorldSaver(world)
    second = first if savers == "one saver" else WorldSaver(world)
    inside = {"a": asyncio.Event(), "b": asyncio.Event()}
    go = {"a": asyncio.Event(), "b": asyncio.Event()}
    graph = gated(inside, go)

    def conf(name: str) -> Any:
        return {"configurable": {"thread_id": "t", "run": name}}

    a = asyncio.create_task(graph.compile(checkpointer=first).ainvoke({"n": 0}, conf("a")))
    await asyncio.wait_for(inside["a"].wait(), 60)  # a is inside its second step
    b = asyncio.create_task(graph.compile(checkpointer=second).ainvoke(None, conf("b")))
    await asyncio.wait_for(
        inside["b"].wait(), 60
    )  # b started from a's latest checkpoint: it took the thread
    go["a"].set()
    with pytest.raises(ThreadTakenOver):
        await asyncio.wait_for(a, 60)  # a's next write is refused, whichever saver it shares
    go["b"].set()
    assert await asyncio.wait_for(b, 60) == {"n": 3}
    tuples = [t async for t in first.alist({"configurable": {"thread_id": "t"}})]
    assert tuples[0].checkpoint["channel_values"]["n"] == 3
    assert unreachable(tuples) == set()


@pytest.mark.parametrize("name", ["sqlite", "postgresql"])
async def test_a_replica_that_ran_a_thread_edits_it_after_another_replica_ran_it(
    name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = world_url_for(name, request, tmp_path)
    editor = spawn("run-then-edit", url, "t", tmp_path)  # runs the thread, then waits
    wait_for(tmp_path / "ran", editor)
    runner = spawn("takeover", url, "t", tmp_path)  # another process runs it again
    assert runner.wait(120) == 0
    (tmp_path / "go").write_text("")
    assert editor.wait(120) == 0, (tmp_path / "run-then-edit-refused").read_text()
    tuples = await history(url, "t")
    assert tuples[0].checkpoint["channel_values"]["n"] == 100  # the edit is the latest
    assert tuples[1].checkpoint["channel_values"]["n"] == LOOP_STEPS
    assert unreachable(tuples) == set()
