"""Child processes for the LangGraph multi-process tests.

Run as ``python -m tests.integrations.lg_procs ROLE WORLD_URL THREAD DIR``. Each
role runs a small graph on ``WorldSaver`` over the world at WORLD_URL, records what
happened as files in DIR (the parent waits on them) and exits 0, or 3 when the
run was refused with ``ThreadTakenOver``.

Roles:
- ``loop``: a one-node loop of :data:`LOOP_STEPS` supersteps from ``{"n": 0}``;
  at ``n == 2`` the node writes ``DIR/inside`` and waits for ``DIR/go``.
- ``takeover``: the same loop on the same thread from its latest checkpoint
  (input ``None``), to the end.
- ``parallel``: one superstep of two parallel nodes: ``fast`` returns at once,
  ``slow`` writes ``DIR/slow-inside`` and waits for ``DIR/go`` (the parent kills
  the process there). ``resume`` runs the same graph with input ``None``.
  Every run of a node appends its name to ``DIR/runs``.
- ``run-then-edit``: the loop to the end (its step never waits), then writes
  ``DIR/ran``, waits for ``DIR/go`` and edits the thread (``aupdate_state`` of
  ``{"n": 100}``), the same saver still open.
- ``ask``: a node that calls ``interrupt()``; ``answer`` resumes it with
  ``Command(resume="yes")`` and writes the final state to ``DIR/result``.
"""

from __future__ import annotations

import asyncio
import json
import operator
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from fxworld.integrations.langgraph import ThreadTakenOver, WorldSaver
from tests.integrations.conftest import open_test_world

LOOP_STEPS = 6
TAKEN_OVER = 3


class Loop(TypedDict):
    n: int


class Both(TypedDict):
    done: Annotated[list[str], operator.add]


class Asked(TypedDict):
    answer: str


def wait_for(path: Path, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(path)
        time.sleep(0.02)


def loop_graph(out: Path) -> StateGraph[Loop]:
    async def step(state: Loop) -> Loop:
        if state["n"] == 2 and not (out / "inside").exists():
            (out / "inside").write_text("")
            await asyncio.to_thread(wait_for, out / "go")
        return {"n": state["n"] + 1}

    graph = StateGraph(Loop)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda s: "step" if s["n"] < LOOP_STEPS else END)
    return graph


def parallel_graph(out: Path) -> StateGraph[Both]:
    def ran(name: str) -> None:
        with (out / "runs").open("a") as f:
            f.write(name + "\n")

    async def fast(state: Both) -> Both:
        ran("fast")
        return {"done": ["fast"]}

    async def slow(state: Both) -> Both:
        ran("slow")
        if not (out / "slow-inside").exists():
            (out / "slow-inside").write_text("")
            await asyncio.to_thread(wait_for, out / "go")
        return {"done": ["slow"]}

    graph = StateGraph(Both)
    graph.add_node("fast", fast)
    graph.add_node("slow", slow)
    graph.add_edge(START, "fast")
    graph.add_edge(START, "slow")
    graph.add_edge("fast", END)
    graph.add_edge("slow", END)
    return graph


def ask_graph() -> StateGraph[Asked]:
    def ask(state: Asked) -> Asked:
        return {"answer": interrupt("approve?")}

    graph = StateGraph(Asked)
    graph.add_node("ask", ask)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", END)
    return graph


async def run(role: str, url: str, thread: str, out: Path) -> int:
    world = open_test_world(url)
    saver = WorldSaver(world)
    config: Any = {"configurable": {"thread_id": thread}}
    try:
        if role == "run-then-edit":
            (out / "inside").write_text("")  # the loop's step does not wait
            app = loop_graph(out).compile(checkpointer=saver)
            await app.ainvoke({"n": 0}, config)
            (out / "ran").write_text("")
            await asyncio.to_thread(wait_for, out / "go")
            await app.aupdate_state(config, {"n": 100})
        elif role in ("loop", "takeover"):
            app = loop_graph(out).compile(checkpointer=saver)
            await app.ainvoke({"n": 0} if role == "loop" else None, config)
        elif role in ("parallel", "resume"):
            both = parallel_graph(out).compile(checkpointer=saver)
            result = await both.ainvoke({"done": []} if role == "parallel" else None, config)
            (out / "result").write_text(json.dumps(result))
        elif role == "ask":
            await ask_graph().compile(checkpointer=saver).ainvoke({"answer": ""}, config)
        elif role == "answer":
            asked = ask_graph().compile(checkpointer=saver)
            result = await asked.ainvoke(Command(resume="yes"), config)
            (out / "result").write_text(json.dumps(result))
        else:
            raise ValueError(role)
    except ThreadTakenOver as refused:
        (out / f"{role}-refused").write_text(str(refused))
        return TAKEN_OVER
    finally:
        await world.close()
    return 0


if __name__ == "__main__":
    role, url, thread, out = sys.argv[1:5]
    sys.exit(asyncio.run(run(role, url, thread, Path(out))))
