"""Issue 45, item 5: one ``WorldSaver`` and one ``WorldSession``, built outside any
event loop (at module level, as the docs show), serve every loop: one
``asyncio.run`` after another, sync calls between them and from a thread while a
loop runs elsewhere, and two loops of two threads at once (SQLite and PostgreSQL).
The tests are plain functions: each loop is one the test starts itself."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fxworld.integrations.langgraph import WorldSaver
from fxworld.integrations.openai_agents import WorldSession
from tests.integrations.conftest import open_test_world, world_url_for
from tests.integrations.test_langgraph_saver import config, counter


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_world_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return world_url_for(request.param, request, tmp_path)


def _in_threads(*jobs: Callable[[], Any]) -> list[Any]:
    """Run each job in a thread of its own, at once; their results (or raise the
    first error)."""
    results: list[Any] = [None] * len(jobs)
    errors: list[BaseException] = []
    start = threading.Barrier(len(jobs))

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = jobs[i]()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if errors:
        raise errors[0]
    return results


def test_one_saver_serves_one_asyncio_run_after_another_and_sync_calls(
    sql_world_url: str,
) -> None:
    saver = WorldSaver(open_test_world(sql_world_url))
    app = counter(3).compile(checkpointer=saver)
    assert asyncio.run(app.ainvoke({"n": 0}, config("a"))) == {"n": 3}
    assert asyncio.run(app.ainvoke({"n": 1}, config("b"))) == {"n": 3}  # a second loop
    assert app.invoke({"n": 2}, config("c")) == {"n": 3}  # no loop at all
    assert asyncio.run(app.ainvoke({"n": 0}, config("d"))) == {"n": 3}
    threads = {t.config["configurable"]["thread_id"] for t in saver.list(None)}
    assert threads == {"a", "b", "c", "d"}
    saver.close()


def test_one_saver_serves_two_loops_at_once_and_a_sync_caller_beside_them(
    sql_world_url: str,
) -> None:
    saver = WorldSaver(open_test_world(sql_world_url))
    app = counter(5).compile(checkpointer=saver)

    async def runs(prefix: str) -> list[Any]:
        return [await app.ainvoke({"n": 0}, config(f"{prefix}{i}")) for i in range(4)]

    def sync_runs() -> list[Any]:
        return [app.invoke({"n": 0}, config(f"s{i}")) for i in range(4)]

    results = _in_threads(lambda: asyncio.run(runs("x")), lambda: asyncio.run(runs("y")), sync_runs)
    assert results == [[{"n": 5}] * 4] * 3
    assert len({t.config["configurable"]["thread_id"] for t in saver.list(None)}) == 12
    saver.close()


def test_a_sync_call_from_inside_the_owning_loop_says_what_to_use() -> None:
    saver = WorldSaver(open_test_world("memory://"))
    app = counter(1).compile(checkpointer=saver)

    async def main() -> None:
        await app.ainvoke({"n": 0}, config("a"))
        with pytest.raises(RuntimeError, match="ainvoke"):
            app.invoke({"n": 0}, config("a"))

    asyncio.run(main())


def test_one_agents_session_serves_every_loop_and_closes(sql_world_url: str) -> None:
    session = WorldSession("conversation", open_test_world(sql_world_url))
    asyncio.run(session.add_items([{"role": "user", "content": "one"}]))
    asyncio.run(session.add_items([{"role": "user", "content": "two"}]))  # a second loop

    async def adds(who: str) -> None:
        for i in range(10):
            await session.add_items([{"role": "user", "content": f"{who}{i}"}])

    _in_threads(lambda: asyncio.run(adds("x")), lambda: asyncio.run(adds("y")))
    items = asyncio.run(session.get_items())
    assert [i["content"] for i in items[:2]] == ["one", "two"] and len(items) == 22
    asyncio.run(session.close())
