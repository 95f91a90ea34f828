"""History reads for benchmarks/bench_langgraph_saver.py (``--history``): the reads
of issue 45's item 3, WorldSaver(PostgresWorld) beside AsyncPostgresSaver on one
PostgreSQL server, on the same data.

Data, written through each saver by LangGraph itself: one ReAct thread of
``--history-steps`` supersteps (a growing messages list, about 90 KB at its end),
and 200 small threads (a 2-step loop, each run with metadata ``{"tenant": "t<k>"}``).
Each read is timed ``REPEAT`` times per round; printed: the median over rounds of
each round's median, in ms, and the ratio WorldSaver / AsyncPostgresSaver.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

REPEAT = 5
SMALL_THREADS = 200


@asynccontextmanager
async def world_saver(url: str, schema: str) -> AsyncIterator[Any]:
    from fxworld.integrations.langgraph import WorldSaver
    from fxworld_postgres import PostgresWorld

    world = PostgresWorld(url, namespace=schema, pool_size=4)
    await world.setup()
    try:
        yield WorldSaver(world)
    finally:
        await world.close()


@asynccontextmanager
async def incumbent(url: str, schema: str, scoped: str) -> AsyncIterator[Any]:
    import asyncpg
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    finally:
        await conn.close()
    async with AsyncPostgresSaver.from_conn_string(scoped) as saver:
        await saver.setup()
        yield saver


async def build(
    saver: Any, graphs: dict[str, Callable[[int, Any], tuple[Any, Any]]], steps: int
) -> None:
    app, data = graphs["react"](steps, saver)
    config: Any = {"configurable": {"thread_id": "long"}, "recursion_limit": 10**6}
    await app.ainvoke(data, config, durability="sync")
    loop, start = graphs["loop"](2, saver)
    for k in range(SMALL_THREADS):
        small: Any = {"configurable": {"thread_id": f"s{k}"}, "metadata": {"tenant": f"t{k}"}}
        await loop.ainvoke(start, small, durability="sync")


async def reads(saver: Any) -> dict[str, Callable[[], Awaitable[Any]]]:
    thread: Any = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}
    ids = [t.config["configurable"]["checkpoint_id"] async for t in saver.alist(thread)]
    steps = {
        t.config["configurable"]["checkpoint_id"]: t.metadata["step"]
        async for t in saver.alist(thread)
    }
    oldest, middle, latest = ids[-1], ids[len(ids) // 2], ids[0]

    def at(cid: str) -> Any:
        return {"configurable": {**thread["configurable"], "checkpoint_id": cid}}

    async def listed(config: Any, **kw: Any) -> int:
        return len([t async for t in saver.alist(config, **kw)])

    return {
        "get_tuple latest": lambda: saver.aget_tuple(thread),
        "get_tuple latest by id": lambda: saver.aget_tuple(at(latest)),
        "get_tuple middle by id": lambda: saver.aget_tuple(at(middle)),
        "get_tuple oldest by id": lambda: saver.aget_tuple(at(oldest)),
        "list limit=10": lambda: listed(thread, limit=10),
        "list before=middle limit=10": lambda: listed(thread, before=at(middle), limit=10),
        "list checkpoint_id=middle": lambda: listed(at(middle)),
        "list filter step=middle": lambda: listed(thread, filter={"step": steps[middle]}),
        "list(None) filter tenant (200 threads)": lambda: listed(None, filter={"tenant": "t7"}),
    }


async def timed(read: Callable[[], Awaitable[Any]]) -> float:
    times = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        await read()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def history(
    url: str, graphs: Any, steps: int, rounds: int, scoped: Callable[[str, str], str]
) -> None:
    run = uuid.uuid4().hex[:6]
    results: dict[str, dict[str, list[float]]] = {"AsyncPostgresSaver": {}, "WorldSaver": {}}
    opened = {
        "AsyncPostgresSaver": lambda: incumbent(
            url, f"hist_{run}_inc", scoped(url, f"hist_{run}_inc")
        ),
        "WorldSaver": lambda: world_saver(url, f"hist_{run}_ws"),
    }
    for name, open_ in opened.items():
        async with open_() as saver:
            await build(saver, graphs, steps)
            named = await reads(saver)
            for _ in range(rounds):
                for what, read in named.items():
                    results[name].setdefault(what, []).append(await timed(read))
    print(
        f"history reads, ReAct thread of {steps} supersteps + {SMALL_THREADS} small threads, "
        f"ms, median of {rounds} rounds of {REPEAT}"
    )
    print(f"{'read':40} {'AsyncPostgresSaver':>18} {'WorldSaver':>11} {'ratio':>7}")
    for what in results["WorldSaver"]:
        inc = statistics.median(results["AsyncPostgresSaver"][what])
        ws = statistics.median(results["WorldSaver"][what])
        print(f"{what:40} {inc:>18.2f} {ws:>11.2f} {ws / inc:>6.1f}x", flush=True)
