"""WorldSaver keeps each channel's value apart from the checkpoint, once per
version: a superstep writes what changed, a 32 MiB state runs on every world, and
a thread written before (values inline in each checkpoint) still reads and
resumes."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from fxworld import MemoryWorld, World
from fxworld.integrations.langgraph import WorldSaver, thread_session
from fxworld.integrations.langgraph_log import BLOB, CHECKPOINT
from fxworld.types import NewEntry
from tests.integrations.conftest import open_test_world, world_url_for

MIB = 1 << 20


class Big(TypedDict):
    big: str
    n: int


def filled(size: int, steps: int) -> StateGraph[Big]:
    """One superstep writes ``big`` (``size`` characters), then ``steps`` change ``n``."""
    graph = StateGraph(Big)
    graph.add_node("fill", lambda s: {"big": "x" * size})
    graph.add_node("count", lambda s: {"n": s["n"] + 1})
    graph.add_edge(START, "fill")
    graph.add_edge("fill", "count")
    graph.add_conditional_edges("count", lambda s: "count" if s["n"] < steps else END)
    return graph


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


async def log_bytes(world: World, thread: str) -> int:
    entries = await world.read(thread_session(thread), 0, limit=100_000)
    return sum(len(json.dumps(e.data)) for e in entries)


@pytest.mark.parametrize("name", ["memory", "sqlite", "postgresql", "redis", "s3"])
async def test_a_32_mib_state_runs_and_is_stored_once_not_once_per_superstep(
    name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    world = open_test_world(world_url_for(name, request, tmp_path))
    try:
        saver = WorldSaver(world)
        app = filled(32 * MIB, 3).compile(checkpointer=saver)
        done = await app.ainvoke({"big": "", "n": 0}, config("t"))
        assert len(done["big"]) == 32 * MIB and done["n"] == 3
        state = await app.aget_state(config("t"))
        assert len(state.values["big"]) == 32 * MIB and state.values["n"] == 3
        # the value lands twice (its task's write and its one blob), base64 in JSON;
        # three supersteps after it add nothing of it
        assert await log_bytes(world, "t") < 3 * 32 * MIB
    finally:
        await world.close()


async def test_a_superstep_writes_what_changed_not_the_whole_state() -> None:
    world = MemoryWorld()
    app = filled(MIB, 20).compile(checkpointer=WorldSaver(world))
    await app.ainvoke({"big": "", "n": 0}, config("t"))
    after_fill = await log_bytes(world, "t")
    await app.aupdate_state(config("t"), {"n": 0})  # an edit writes the whole state
    edited = await log_bytes(world, "t")
    await app.ainvoke(None, config("t"))
    assert await log_bytes(world, "t") - edited < 64 * 1024  # 20 supersteps: small
    assert after_fill < 3 * MIB


async def test_a_thread_written_with_values_inline_reads_and_resumes() -> None:
    """Threads written before values were kept apart hold whole checkpoints."""
    world = MemoryWorld()
    saver = WorldSaver(world)
    app = filled(10, 4).compile(checkpointer=saver, interrupt_before=["count"])
    await app.ainvoke({"big": "", "n": 0}, config("new"))  # stops before count
    sid = thread_session("old")
    for entry in await world.read(thread_session("new"), 0):  # the same log, as it was
        if entry.kind == CHECKPOINT:
            tup = await saver.aget_tuple(
                {
                    "configurable": {
                        **config("new")["configurable"],
                        "checkpoint_id": entry.data["id"],
                    }
                }
            )
            assert tup is not None
            data = {k: v for k, v in entry.data.items() if k != "values"}
            data["thread"] = "old"
            kind, raw = saver.serde.dumps_typed(tup.checkpoint)  # whole, values inline
            data["checkpoint"] = [kind, base64.b64encode(raw).decode("ascii")]
            await world.append(sid, [NewEntry(CHECKPOINT, data)])
        elif entry.kind != BLOB and entry.kind.startswith("lg."):
            await world.append(sid, [NewEntry(entry.kind, entry.data)])
    assert not any(e.kind == BLOB for e in await world.read(sid, 0))
    old = await app.aget_state(config("old"))
    assert old.values == {"big": "x" * 10, "n": 0} and old.next == ("count",)
    resumed = filled(10, 4).compile(checkpointer=WorldSaver(world))
    assert await resumed.ainvoke(None, config("old")) == {"big": "x" * 10, "n": 4}
