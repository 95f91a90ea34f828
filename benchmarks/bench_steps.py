"""Agent tool steps per second: fxworld beside LangGraph, on one throwaway PostgreSQL.

    pip install -r benchmarks/requirements-steps.txt   # the peers: never fxworld's deps
    python benchmarks/bench_steps.py [--steps 100] [--rounds 3] [--url postgresql://...]

The workload, the same for each library: a flow is one conversation of ``--steps``
tool steps, then a final answer. A tool step is a model reply that asks for a
(no-op) tool, then that tool's run and result; the "model" answers at once, so what
is measured is the durable bookkeeping of the step.

- fxworld: ``Agent`` on ``PostgresWorld``; one ``agent.work(concurrency=flows)``
  runs the flows' turns (each step is fenced and durable before the next begins).
- LangGraph: a ``StateGraph`` of a model node and a tool node looping over a
  ``messages`` list (the shape of a ReAct agent), with ``AsyncPostgresSaver`` and
  ``durability="sync"``, one saver (one connection) per flow: a tool step is two
  supersteps, each checkpointed before the next starts.

All run in one process against one server, at 1 and 8 flows, ``--rounds`` times;
the figures are medians. Printed per library: tool steps/s, the ratio to LangGraph,
client CPU per step (this process), and statements per step as the server counts
them (``pg_stat_statements``, top level; for a client that does not pipeline, one
statement is one round trip). Prints, never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import operator
import signal
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_engine import CountingModel  # (this script's folder is on the path)

from fxworld import Agent, tool
from fxworld_postgres import PostgresWorld


class _Counter:
    """Statements the server ran (``pg_stat_statements``), when it is loaded."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn: asyncpg.Connection | None = None

    async def start(self) -> None:
        self.conn = await asyncpg.connect(self.url)
        try:
            await self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            await self.conn.fetchval("SELECT count(*) FROM pg_stat_statements")
        except asyncpg.PostgresError:
            await self.conn.close()
            self.conn = None

    async def reset(self) -> None:
        if self.conn is not None:
            await self.conn.execute("SELECT pg_stat_statements_reset()")

    async def statements(self, database: str | None) -> int | None:
        """Statements run in ``database`` (None: the one of the URL)."""
        if self.conn is None:
            return None
        n = await self.conn.fetchval(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE dbid = "
            "(SELECT oid FROM pg_database WHERE datname = coalesce($1, current_database())) "
            "AND query NOT ILIKE '%pg_stat_statements%'",
            database,
        )
        return int(n)

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()


# -- fxworld ------------------------------------------------------------------------


@tool(input_schema={"type": "object", "properties": {}})
async def noop() -> str:
    return "ok"


async def fxworld_flows(url: str, flows: int, steps: int) -> Callable[[], Awaitable[None]]:
    world = PostgresWorld(url, namespace=f"steps_{uuid.uuid4().hex[:8]}", pool_size=flows + 2)
    await world.setup()
    agent = Agent(CountingModel(steps, tool="noop"), tools=[noop], world=world)
    turns = [agent.session(f"f{k}").prompt("go") for k in range(flows)]
    for t in turns:
        await t.accepted

    async def run() -> None:
        try:
            await agent.work(until_idle=True, concurrency=flows)
            for k in range(flows):  # (awaiting the turns would follow their streams)
                last = (await world.read(f"f{k}", 3 * steps + 3))[-1]
                assert last.kind == "turn.finished" and last.data["text"] == "done"
        finally:
            await world.close()

    return run


# -- LangGraph ----------------------------------------------------------------------


class _State(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]


async def langgraph_flows(url: str, flows: int, steps: int) -> Callable[[], Awaitable[None]]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.graph import END, START, StateGraph

    async def model(state: _State) -> dict[str, Any]:
        n = len(state["messages"])
        if n > 2 * steps:
            return {"messages": [{"role": "assistant", "text": "done"}]}
        call = {"id": f"c{n}", "name": "noop", "input": {}}
        return {"messages": [{"role": "assistant", "text": "", "tool_calls": [call]}]}

    async def tools(state: _State) -> dict[str, Any]:
        call = state["messages"][-1]["tool_calls"][0]
        return {"messages": [{"role": "tool", "text": "ok", "tool_call_id": call["id"]}]}

    def route(state: _State) -> str:
        return "tools" if state["messages"][-1].get("tool_calls") else END

    builder = StateGraph(_State)
    builder.add_node("model", model)
    builder.add_node("tools", tools)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, ["tools", END])
    builder.add_edge("tools", "model")
    savers = [AsyncPostgresSaver.from_conn_string(url) for _ in range(flows)]
    opened = [await s.__aenter__() for s in savers]
    await opened[0].setup()
    graphs = [builder.compile(checkpointer=s) for s in opened]
    prefix = uuid.uuid4().hex[:8]

    async def one(k: int) -> None:
        config: Any = {"configurable": {"thread_id": f"{prefix}-{k}"}, "recursion_limit": 10**6}
        out = await graphs[k].ainvoke(
            {"messages": [{"role": "user", "text": "go"}]}, config, durability="sync"
        )
        assert out["messages"][-1]["text"] == "done"

    async def run() -> None:
        try:
            await asyncio.gather(*(one(k) for k in range(flows)))
        finally:
            for s in savers:
                await s.__aexit__(None, None, None)

    return run


# -- DBOS ---------------------------------------------------------------------------

_dbos_flow: Any = None
DBOS_DATABASE = "bench_steps_dbos"


def _dbos_launch(url: str) -> Any:
    """DBOS is a process-wide singleton: configured and launched once."""
    global _dbos_flow
    from dbos import DBOS

    @DBOS.step()
    async def model(n: int, steps: int) -> dict[str, Any]:
        if n >= steps:
            return {"role": "assistant", "text": "done"}
        return {"role": "assistant", "tool_calls": [{"id": f"c{n}", "name": "noop"}]}

    @DBOS.step()
    async def run_tool(call_id: str) -> dict[str, Any]:
        return {"role": "tool", "text": "ok", "tool_call_id": call_id}

    @DBOS.workflow()
    async def flow(steps: int) -> str:
        n = 0
        while True:
            reply = await model(n, steps)
            if not reply.get("tool_calls"):
                return str(reply["text"])
            await run_tool(reply["tool_calls"][0]["id"])
            n += 1

    # its own database, so its background polling is not counted for the others
    system_db = url.rsplit("/", 1)[0] + "/" + DBOS_DATABASE
    DBOS(config={"name": "bench-steps", "system_database_url": system_db, "log_level": "WARNING"})
    DBOS.launch()
    _dbos_flow = flow
    return DBOS


async def dbos_flows(url: str, flows: int, steps: int) -> Callable[[], Awaitable[None]]:
    """One ``@DBOS.workflow`` per flow; a tool step is two ``@DBOS.step`` calls (the
    model's reply, the tool's run), each checkpointed."""
    dbos = _dbos_launch(url) if _dbos_flow is None else __import__("dbos").DBOS

    async def run() -> None:
        handles = [await dbos.start_workflow_async(_dbos_flow, steps) for _ in range(flows)]
        for h in handles:
            assert await h.get_result() == "done"

    return run


# -- the runs -----------------------------------------------------------------------

Prepare = Callable[[str, int, int], Awaitable[Callable[[], Awaitable[None]]]]
LIBRARIES: dict[str, Prepare] = {
    "fxworld": fxworld_flows,
    "LangGraph": langgraph_flows,
    "DBOS": dbos_flows,
}


async def measure(
    counter: _Counter, name: str, url: str, flows: int, steps: int
) -> tuple[float, float, float | None]:
    """(tool steps/s, client CPU ms per step, statements per step) of one run."""
    run = await LIBRARIES[name](url, flows, steps)
    await counter.reset()
    cpu, t0 = time.process_time(), time.perf_counter()
    await run()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu
    statements = await counter.statements(DBOS_DATABASE if name == "DBOS" else None)
    n = flows * steps
    return n / elapsed, cpu / n * 1000, None if statements is None else statements / n


async def main(url: str, steps: int, rounds: int, flows_list: list[int]) -> None:
    try:
        import dbos  # noqa: F401
    except ImportError:
        LIBRARIES.pop("DBOS")
        print("(DBOS not installed: left out)")
    counter = _Counter(url)
    await counter.start()
    print(f"{steps} tool steps per flow, medians of {rounds} rounds", flush=True)
    rows: list[tuple[int, str, float, float, float, float | None]] = []
    for flows in flows_list:
        # the libraries take turns in each round, so that each round's ratios compare
        # runs made under the same load (the machine may be shared)
        figures: dict[str, list[tuple[float, float, float | None]]] = {n: [] for n in LIBRARIES}
        for name in LIBRARIES:  # warm up: first connections, prepared statements
            await measure(counter, name, url, flows, 3)
        for r in range(rounds):
            for name in LIBRARIES:
                figures[name].append(await measure(counter, name, url, flows, steps))
            shown = ", ".join(f"{n} {f[r][0]:,.0f}" for n, f in figures.items())
            print(f"  {flows} flow(s), round {r + 1}: steps/s {shown}", flush=True)
        peer = figures["LangGraph"]
        for name, fs in figures.items():
            rate = statistics.median(f[0] for f in fs)
            ratio = statistics.median(f[0] / p[0] for f, p in zip(fs, peer, strict=True))
            cpu = statistics.median(f[1] for f in fs)
            stmts = [f[2] for f in fs if f[2] is not None]
            per = statistics.median(stmts) if stmts else None
            rows.append((flows, name, rate, ratio, cpu, per))
    await counter.close()
    if _dbos_flow is not None:
        __import__("dbos").DBOS.destroy()
    print()
    print(f"{'flows':>5}  {'library':12} {'steps/s':>9} {'vs LangGraph':>13} "
          f"{'CPU ms/step':>12} {'statements/step':>16}")  # fmt: skip
    print("-" * 74)
    for flows, name, rate, ratio, cpu, per in rows:
        shown = "n/a" if per is None else f"{per:.2f}"
        print(f"{flows:>5}  {name:12} {rate:>9,.0f} {ratio:>12.2f}x {cpu:>12.3f} {shown:>16}")
    print(
        "\nsteps/s = tool steps (a reply asking for a tool + the tool's run) per second; "
        "vs LangGraph = median of the rounds' ratios; CPU = this process (the client), "
        "per step; statements = as the server counted them (pg_stat_statements), per step"
    )


def _server(*, fsync: bool) -> Any:
    """A throwaway local server with pg_stat_statements loaded."""
    from tests.support.postgres_server import start_postgres

    server = start_postgres(fsync=fsync)

    async def preload() -> None:
        conn = await asyncpg.connect(server.url)
        try:
            await conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        finally:
            await conn.close()

    asyncio.run(preload())
    server.kill()  # a restart loads it (stop() would also remove the cluster)
    server.start()
    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="an existing server (default: a throwaway local one)")
    parser.add_argument("--steps", type=int, default=100, help="tool steps per flow")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flows", default="1,8", help="comma-separated flow counts")
    parser.add_argument("--no-fsync", action="store_true", help="throwaway server without fsync")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop our server when killed
    server = None if args.url else _server(fsync=not args.no_fsync)
    try:
        asyncio.run(
            main(
                args.url or server.url,
                args.steps,
                args.rounds,
                [int(x) for x in args.flows.split(",")],
            )
        )
    finally:
        if server is not None:
            server.stop()
