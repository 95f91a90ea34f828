"""Agent routing (W19) on Redis, Redis Cluster and S3, beyond the kit's scenarios:
a namespace written by the code before owners existed (today's main) keeps
working, its wakes taken by any agent; an agent's take costs the same however many
of another agent's wakes are due (S3: it never lists their prefixes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fxworld import open_world
from fxworld.protocol import AgentRouter
from fxworld_s3 import S3World
from tests.support.before import unpack_before
from tests.support.namespaces import fresh_namespace
from tests.support.redis_server import RedisCluster, RedisServer
from tests.support.s3_server import S3Server

OLD = ["old-1", "old-2", "old-3"]

_WRITE_OLD = """
import asyncio, sys
from fxworld import open_world
from fxworld.types import NewEntry

async def main():
    w = open_world(sys.argv[1])
    await w.setup()
    for sid in sys.argv[2:]:
        await w.append(sid, [NewEntry("prompt", {"text": "Hi"})], wake=0)
    await w.close()

asyncio.run(main())
"""


def _url(base: str) -> str:
    return f"{base}{'&' if '?' in base else '?'}namespace={fresh_namespace('old')}"


@pytest.fixture(scope="module")
def old_code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The code before owners existed (``tests.support.before``)."""
    return unpack_before(tmp_path_factory.mktemp("before"))


@pytest.fixture(params=["redis", "cluster", "s3"])
def old_url(request: pytest.FixtureRequest, old_code: Path) -> str:
    base: str
    if request.param == "redis":
        base = request.getfixturevalue("redis_server").url
    elif request.param == "cluster":
        base = request.getfixturevalue("redis_cluster").url
    else:
        base = request.getfixturevalue("s3_server").url()
    url = _url(base)
    env = {**os.environ, "PYTHONPATH": str(old_code)}
    subprocess.run([sys.executable, "-c", _WRITE_OLD, url, *OLD], env=env, check=True, cwd=old_code)
    return url


async def test_a_namespace_written_before_owners_is_taken_by_any_agent(old_url: str) -> None:
    world = open_world(old_url)
    try:
        assert isinstance(world, AgentRouter)
        assert [await world.owner(sid) for sid in OLD] == [None, None, None]
        taken = await world.take_wakes_for("support", lease=30, limit=10)
        assert sorted(w.session_id for w in taken) == OLD
        assert {w.agent for w in taken} == {None}  # nobody's: any agent takes it
        assert await world.claim("old-1", "support") == "support"  # the engine claims it
        assert await world.claim("old-1", "sales") == "support"
        for w in taken:
            await world.finish_wake(w)
        await world.wake("old-1")
        await world.wake("old-2")
        assert [w.session_id for w in await world.take_wakes_for("sales", lease=30)] == ["old-2"]
        assert [w.session_id for w in await world.take_wakes_for("support", lease=30)] == ["old-1"]
    finally:
        await world.close()


async def test_an_agents_take_on_s3_never_lists_another_agents_keys(s3_server: S3Server) -> None:
    """W19, no starvation: a fresh world's take for ``support`` costs the same LISTs
    (its 4 prefixes and the 4 shared ones) with 0 and with 60 due wakes of ``sales``,
    and finds its own wake."""
    costs = []
    for crowd in (0, 60):
        ns = fresh_namespace("crowd")
        w = S3World("fxworld-test", endpoint_url=s3_server.endpoint, namespace=ns)
        for i in range(crowd):
            await w.claim(f"b{i}", "sales")
            await w.wake(f"b{i}")
        await w.claim("mine", "support")
        await w.wake("mine")
        fresh = S3World("fxworld-test", endpoint_url=s3_server.endpoint, namespace=ns)
        before = fresh.store.counts.copy()
        taken = await fresh.take_wakes_for("support", lease=30, limit=1)
        costs.append((fresh.store.counts - before)["LIST"])
        assert [(t.session_id, t.agent) for t in taken] == [("mine", "support")]
        await w.drop_namespace()
        await w.close()
        await fresh.close()
    assert costs == [8, 8]


@pytest.mark.parametrize("server", ["redis_server", "redis_cluster"])
async def test_an_agents_take_on_redis_finds_its_wake_behind_many(
    server: str, request: pytest.FixtureRequest
) -> None:
    """W19: ``support``'s one due wake is taken first, behind 200 due wakes of
    ``sales`` that are older; ``sales``'s take gets none of ``support``'s."""
    found: RedisServer | RedisCluster = request.getfixturevalue(server)
    world = open_world(_url(found.url))
    try:
        assert isinstance(world, AgentRouter)
        for i in range(200):
            await world.claim(f"b{i}", "sales")
            await world.wake(f"b{i}")
        await world.claim("mine", "support")
        await world.wake("mine")
        taken = await world.take_wakes_for("support", lease=30, limit=10)
        assert [(t.session_id, t.agent) for t in taken] == [("mine", "support")]
        theirs = await world.take_wakes_for("sales", lease=30, limit=100)
        assert len(theirs) == 100 and {t.agent for t in theirs} == {"sales"}
    finally:
        await world.close()


@pytest.mark.parametrize("server", ["redis_server", "redis_cluster", "s3_server"])
async def test_renaming_an_agent_moves_its_sessions_and_their_wakes(
    server: str, request: pytest.FixtureRequest
) -> None:
    """``rename_agent``: ``helpdesk``'s sessions (one with a pending wake) become
    ``support``'s; the wake is then taken by ``support`` only; ``sales``'s stay."""
    from fxworld.engine.owners import rename_agent

    found = request.getfixturevalue(server)
    base = found.url() if server == "s3_server" else found.url
    world = open_world(_url(base))
    await world.setup()
    try:
        assert isinstance(world, AgentRouter)
        for sid, agent in (("h1", "helpdesk"), ("h2", "helpdesk"), ("s1", "sales")):
            await world.claim(sid, agent)
        await world.wake("h1")
        assert await rename_agent(world, "helpdesk", "support") == 2
        assert [await world.owner(s) for s in ("h1", "h2", "s1")] == ["support", "support", "sales"]
        assert await world.take_wakes_for("helpdesk", lease=30) == []
        taken = await world.take_wakes_for("support", lease=30)
        assert [(t.session_id, t.agent) for t in taken] == [("h1", "support")]
    finally:
        await world.close()
