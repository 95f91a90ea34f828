"""Agent tool steps per second: fxworld beside LangGraph, on one throwaway PostgreSQL.

    pip install -r benchmarks/requirements-steps.txt   # the peers: never fxworld's deps
    python benchmarks/bench_steps.py [--steps 100] [--rounds 3] [--url postgresql://...]

The workload, the same for each library: a flow is one conversation of ``--steps``
tool steps, then a final answer. A tool step is a model reply that asks for a
(no-op) tool, then that tool's run and result; the "model" answers at once, so what
is measured is the durable bookkeeping of the step.

- fxworld: ``Agent`` on ``PostgresWorld``; one ``agent.work(concurrency=flows)``
  runs the flows' turns (each step is fenced and durable before the next begins).
- LangGraph, two graphs of a model node and a tool node, with
  ``AsyncPostgresSaver`` and ``durability="sync"``: a tool step is two supersteps,
  each checkpointed before the next starts. "LangGraph messages" loops over a
  growing ``messages`` list (the shape of a ReAct agent; its checkpoints grow with
  the conversation); "LangGraph dict" has a fixed-size state ``{"step": int,
  "last": str}`` replaced each superstep (its checkpoints stay small and inline, no
  blob rows), so a ratio to it does not come from LangGraph's checkpoint growth.
  Each flow has its own saver on its own connection: a saver serialises its calls
  with one lock, so flows sharing one saver (even over a pool) would wait for each
  other. The connection is in psycopg's pipeline mode (``pipeline=True``), which
  measured a few per cent faster on average than without (within the noise).
- DBOS (when installed): one workflow per flow, two checkpointed steps per tool step.

All run in one process against one server, at 1 and 8 flows, ``--rounds`` times;
the figures are medians. Printed per library: tool steps/s, the ratios to both
LangGraph graphs, client CPU per tool step (this process's CPU time over the run
divided by the tool steps), and statements per step as the server counts them
(``pg_stat_statements``, top level; for a client that does not pipeline, one
statement is one round trip); then the targets of issue #23 item 5 beside this
run's figures. Prints, never asserts.

``--profile postgres`` (or ``sqlite``) runs only fxworld, once, at the largest
``--flows``, under cProfile, and prints the functions with the most own time and
the most cumulative time, and own time grouped by kind (``_profile.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import operator
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_engine import CountingModel  # (this script's folder is on the path)

from fxworld import Agent, SqliteWorld, World, tool
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
    return await fxworld_run(world, flows, steps)


async def fxworld_run(world: World, flows: int, steps: int) -> Callable[[], Awaitable[None]]:
    """Prompt ``flows`` sessions; the run works their turns to the end."""
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


class _Messages(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]


class _Fixed(TypedDict):
    step: int
    last: str


def _messages_graph(steps: int) -> tuple[Any, dict[str, Any], Callable[[Any], bool]]:
    """The ReAct shape: each superstep appends to a ``messages`` list."""
    from langgraph.graph import END, START, StateGraph

    async def model(state: _Messages) -> dict[str, Any]:
        n = len(state["messages"])
        if n > 2 * steps:
            return {"messages": [{"role": "assistant", "text": "done"}]}
        call = {"id": f"c{n}", "name": "noop", "input": {}}
        return {"messages": [{"role": "assistant", "text": "", "tool_calls": [call]}]}

    async def tools(state: _Messages) -> dict[str, Any]:
        call = state["messages"][-1]["tool_calls"][0]
        return {"messages": [{"role": "tool", "text": "ok", "tool_call_id": call["id"]}]}

    def route(state: _Messages) -> str:
        return "tools" if state["messages"][-1].get("tool_calls") else END

    builder = StateGraph(_Messages)
    builder.add_node("model", model)
    builder.add_node("tools", tools)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, ["tools", END])
    builder.add_edge("tools", "model")
    start = {"messages": [{"role": "user", "text": "go"}]}
    return builder, start, lambda out: bool(out["messages"][-1]["text"] == "done")


def _fixed_graph(steps: int) -> tuple[Any, dict[str, Any], Callable[[Any], bool]]:
    """A fixed-size state, both fields replaced each superstep: no growing list."""
    from langgraph.graph import END, START, StateGraph

    async def model(state: _Fixed) -> dict[str, Any]:
        return {"last": "done" if state["step"] >= steps else "call"}

    async def tools(state: _Fixed) -> dict[str, Any]:
        return {"step": state["step"] + 1, "last": "ok"}

    def route(state: _Fixed) -> str:
        return "tools" if state["last"] == "call" else END

    builder = StateGraph(_Fixed)
    builder.add_node("model", model)
    builder.add_node("tools", tools)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, ["tools", END])
    builder.add_edge("tools", "model")
    return builder, {"step": 0, "last": "go"}, lambda out: out == {"step": steps, "last": "done"}


Graph = Callable[[int], tuple[Any, dict[str, Any], Callable[[Any], bool]]]


async def langgraph_flows(
    url: str, flows: int, steps: int, graph: Graph
) -> Callable[[], Awaitable[None]]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    builder, start, finished = graph(steps)
    async with AsyncPostgresSaver.from_conn_string(url) as plain:
        await plain.setup()  # (its CREATE INDEX CONCURRENTLY cannot run in a pipeline)
    savers = [AsyncPostgresSaver.from_conn_string(url, pipeline=True) for _ in range(flows)]
    opened = [await s.__aenter__() for s in savers]
    graphs = [builder.compile(checkpointer=s) for s in opened]
    prefix = uuid.uuid4().hex[:8]

    async def one(k: int) -> None:
        config: Any = {"configurable": {"thread_id": f"{prefix}-{k}"}, "recursion_limit": 10**6}
        out = await graphs[k].ainvoke(start, config, durability="sync")
        assert finished(out), out

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
    "LG messages": lambda url, f, s: langgraph_flows(url, f, s, _messages_graph),
    "LG dict": lambda url, f, s: langgraph_flows(url, f, s, _fixed_graph),
    "DBOS": dbos_flows,
}
PEERS = ("LG messages", "LG dict")
"""The LangGraph graphs every library's rate is compared with."""


async def measure(counter: _Counter, name: str, url: str, flows: int, steps: int) -> Figures:
    """One run of ``name``: its :data:`Figures`."""
    run = await LIBRARIES[name](url, flows, steps)
    await counter.reset()
    cpu, t0 = time.process_time(), time.perf_counter()
    await run()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu
    statements = await counter.statements(DBOS_DATABASE if name == "DBOS" else None)
    n = flows * steps
    return n / elapsed, cpu / n * 1000, None if statements is None else statements / n


Figures = tuple[float, float, float | None]
"""One run: (tool steps/s, client CPU ms per tool step, statements per tool step)."""


@dataclass(frozen=True)
class Row:
    """One library at one flow count: the medians of its rounds."""

    flows: int
    library: str
    rate: float  #: tool steps/s
    ratios: dict[str, float]  #: per peer, the median of the rounds' ratios of ``rate``
    cpu: float  #: client CPU ms per tool step
    statements: float | None  #: per tool step, as the server counted them


async def main(url: str, steps: int, rounds: int, flows_list: list[int]) -> None:
    try:
        import dbos  # noqa: F401
    except ImportError:
        LIBRARIES.pop("DBOS")
        print("(DBOS not installed: left out)")
    counter = _Counter(url)
    await counter.start()
    print(f"{steps} tool steps per flow, medians of {rounds} rounds", flush=True)
    rows: list[Row] = []
    for flows in flows_list:
        rows += await _rounds(counter, url, flows, steps, rounds)
    await counter.close()
    if _dbos_flow is not None:
        __import__("dbos").DBOS.destroy()
    _print_table(rows)
    _print_targets(rows)


async def _rounds(counter: _Counter, url: str, flows: int, steps: int, rounds: int) -> list[Row]:
    # the libraries take turns in each round, so that each round's ratios compare
    # runs made under the same load (the machine may be shared)
    figures: dict[str, list[Figures]] = {n: [] for n in LIBRARIES}
    for name in LIBRARIES:  # warm up: first connections, prepared statements
        await measure(counter, name, url, flows, 3)
    for r in range(rounds):
        for name in LIBRARIES:
            figures[name].append(await measure(counter, name, url, flows, steps))
        shown = ", ".join(f"{n} {f[r][0]:,.0f}" for n, f in figures.items())
        print(f"  {flows} flow(s), round {r + 1}: steps/s {shown}", flush=True)
    return [_row(flows, name, fs, figures) for name, fs in figures.items()]


def _row(flows: int, name: str, fs: list[Figures], figures: dict[str, list[Figures]]) -> Row:
    ratios = {
        peer: statistics.median(f[0] / p[0] for f, p in zip(fs, figures[peer], strict=True))
        for peer in PEERS
    }
    stmts = [f[2] for f in fs if f[2] is not None]
    rate, cpu = statistics.median(f[0] for f in fs), statistics.median(f[1] for f in fs)
    return Row(flows, name, rate, ratios, cpu, statistics.median(stmts) if stmts else None)


def _print_table(rows: list[Row]) -> None:
    print()
    vs = " ".join(f"{'vs ' + p:>15}" for p in PEERS)
    print(f"{'flows':>5}  {'library':12} {'steps/s':>9} {vs} {'CPU ms/step':>12} "
          f"{'statements/step':>16}")  # fmt: skip
    print("-" * (60 + 16 * len(PEERS)))
    for r in rows:
        shown = "n/a" if r.statements is None else f"{r.statements:.2f}"
        vs = " ".join(f"{r.ratios[p]:>14.2f}x" for p in PEERS)
        print(f"{r.flows:>5}  {r.library:12} {r.rate:>9,.0f} {vs} {r.cpu:>12.3f} {shown:>16}")
    print(
        "\nsteps/s = tool steps (a reply asking for a tool + the tool's run) per second; "
        "vs = the median of the rounds' ratios of steps/s; LG = LangGraph's "
        "AsyncPostgresSaver (durability='sync'), its state a growing messages list or a "
        "fixed-size dict; CPU = this process's CPU time (the client) over the run, per "
        "tool step; statements = as the server counted them (pg_stat_statements), per "
        "tool step"
    )


def _print_targets(rows: list[Row]) -> None:
    """Issue #23 item 5's targets for fxworld on PostgreSQL, beside this run's figures."""
    ours = {r.flows: r for r in rows if r.library == "fxworld"}
    lines: list[tuple[str, str, float]] = []
    if 8 in ours:
        lines.append(("client CPU ms per tool step, 8 flows", "<= 0.5", ours[8].cpu))
    for flows, want in ((8, 3.0), (1, 1.5)):
        for peer in PEERS if flows in ours else ():
            got = ours[flows].ratios[peer]
            lines.append((f"steps/s vs {peer}, {flows} flow(s)", f">= {want:g}x", got))
    if lines:
        print("\ntargets (issue #23 item 5; the Redis one is bench_redis.py's engine row):")
    for what, target, got in lines:
        bound = float(target.split()[1].rstrip("x"))
        met = got <= bound if target.startswith("<=") else got >= bound
        print(f"  {what:40} {target:>7} {got:>8.2f}  {'met' if met else 'not met'}")


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


async def profile_fxworld(kind: str, url: str | None, flows: int, steps: int) -> None:
    """One fxworld run at ``flows`` flows under cProfile (see ``_profile.py``), after
    a short run unprofiled (imports, first connections)."""
    from _profile import Profiler

    with tempfile.TemporaryDirectory() as tmp:

        def new() -> World:
            ns = f"prof_{uuid.uuid4().hex[:8]}"
            if kind == "sqlite":
                return SqliteWorld(Path(tmp) / "world.db", namespace=ns)
            return PostgresWorld(str(url), namespace=ns, pool_size=flows + 2)

        await (await fxworld_run(new(), flows, 3))()
        profiler = Profiler()
        run = await fxworld_run(new(), flows, steps)
        print(f"fxworld on {kind}: {flows} flows of {steps} tool steps, profiled", flush=True)
        await profiler.run(run())
        profiler.report(steps=flows * steps)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="an existing server (default: a throwaway local one)")
    parser.add_argument("--steps", type=int, default=100, help="tool steps per flow")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flows", default="1,8", help="comma-separated flow counts")
    parser.add_argument("--no-fsync", action="store_true", help="throwaway server without fsync")
    parser.add_argument(
        "--profile",
        choices=["postgres", "sqlite"],
        help="only profile fxworld, at the largest --flows, on this world",
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop our server when killed
    flows_list = [int(x) for x in args.flows.split(",")]
    if args.profile == "sqlite":
        asyncio.run(profile_fxworld("sqlite", None, max(flows_list), args.steps))
        sys.exit(0)
    server = None if args.url else _server(fsync=not args.no_fsync)
    url = args.url or server.url
    try:
        if args.profile:
            asyncio.run(profile_fxworld(args.profile, url, max(flows_list), args.steps))
        else:
            asyncio.run(main(url, args.steps, args.rounds, flows_list))
    finally:
        if server is not None:
            server.stop()
