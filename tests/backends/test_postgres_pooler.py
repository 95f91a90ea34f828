"""PostgresWorld through a real PgBouncer (1.18, from apt) in transaction mode: the
whole kit, the failure the issue found (#28) and how ``?pooler=transaction`` fixes it,
``follow()`` through ``listen_url`` and by polling, and bad options refused."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import quote

import asyncpg
import pytest

from fxworld import NewEntry, open_world
from fxworld.errors import ConfigurationError, WorldError
from fxworld_conformance import Target, WorldSuite
from fxworld_postgres import PostgresWorld
from tests.support.namespaces import fresh_namespace
from tests.support.pgbouncer_server import PgBouncer
from tests.support.postgres_server import PostgresServer


def _through(bouncer: PgBouncer, namespace: str, query: str = "") -> str:
    return f"{bouncer.url}?namespace={namespace}{query}"


def _listen(server: PostgresServer) -> str:
    return "&listen_url=" + quote(server.url, safe="")


class TestThroughPgBouncer(WorldSuite):
    """The whole kit through PgBouncer in transaction mode: every call may land on
    another server connection than the one before. Every check runs, at the kit's
    ``quick`` profile (fewer examples): the ``ci`` profile runs them all on a direct
    connection in test_postgres.py, and the suite's time is budgeted."""

    @pytest.fixture
    def fxworld_profile(self) -> str:
        return "quick"

    @pytest.fixture
    def fxworld_target(self, pgbouncer: PgBouncer, postgres_server: PostgresServer) -> Target:
        return Target(url=f"{pgbouncer.url}?pooler=transaction{_listen(postgres_server)}")


async def _pin_a_server_connection(bouncer: PgBouncer) -> asyncpg.Connection:
    """A client in an open transaction: PgBouncer gives it the server connection used
    last (LIFO) and keeps it, so the world's next call runs on another one."""
    s = bouncer.server
    conn = await asyncpg.connect(
        host="127.0.0.1",
        port=bouncer.port,
        user=s.user,
        password=s.password,
        database=s.database,
        statement_cache_size=0,
    )
    await conn.execute("BEGIN")
    await conn.execute("SELECT 1")
    return conn


async def _append_twice_across_server_connections(url: str, bouncer: PgBouncer) -> int:
    world = open_world(url)
    await world.setup()
    try:
        await world.append("s", [NewEntry("note", {"n": 1})])
        pinned = await _pin_a_server_connection(bouncer)
        try:
            return await world.append("s", [NewEntry("note", {"n": 2})])
        finally:
            await pinned.close()
    finally:
        await world.close()


async def test_without_the_pooler_option_the_statement_cache_breaks(pgbouncer: PgBouncer) -> None:
    """The issue's failure, kept as proof that the option is needed: a statement
    prepared on one server connection is run on another."""
    with pytest.raises(WorldError, match="InvalidSQLStatementNameError"):
        await _append_twice_across_server_connections(
            _through(pgbouncer, fresh_namespace()), pgbouncer
        )


async def test_with_pooler_transaction_appends_move_between_server_connections(
    pgbouncer: PgBouncer,
) -> None:
    url = _through(pgbouncer, fresh_namespace(), "&pooler=transaction")
    assert await _append_twice_across_server_connections(url, pgbouncer) == 2


async def _followed_within(world: PostgresWorld, writer: PostgresWorld) -> float:
    """Seconds from an append to its entry reaching a follower."""
    got: asyncio.Queue[float] = asyncio.Queue()

    async def follow() -> None:
        async for _ in world.follow("f"):
            await got.put(time.monotonic())

    task = asyncio.create_task(follow())
    try:
        await writer.append("f", [NewEntry("note", {})])
        await asyncio.wait_for(got.get(), 10)  # the follower is under way
        await asyncio.sleep(0.3)
        sent = time.monotonic()
        await writer.append("f", [NewEntry("note", {})])
        return await asyncio.wait_for(got.get(), 10) - sent
    finally:
        task.cancel()


async def test_follow_is_pushed_through_listen_url_and_polled_without(
    pgbouncer: PgBouncer, postgres_server: PostgresServer
) -> None:
    ns = fresh_namespace()
    pushed = PostgresWorld(
        _through(pgbouncer, ns, "&pooler=transaction&follow_poll=5" + _listen(postgres_server))
    )
    polled = PostgresWorld(_through(pgbouncer, ns, "&pooler=transaction&follow_poll=0.5"))
    writer = PostgresWorld(_through(pgbouncer, ns, "&pooler=transaction"))
    await writer.setup()
    try:
        assert await _followed_within(pushed, writer) < 2.0  # pushed: not the 5 s poll
        assert await _followed_within(polled, writer) < 0.5 + 2.0  # the poll's bound
    finally:
        for w in (pushed, polled, writer):
            await w.close()


@pytest.mark.parametrize(
    "query",
    ["&pooler=statement", "&pooler=", "&listen_url=redis%3A%2F%2Fh", "&follow_poll=-1"],
)
async def test_bad_pooler_options_are_refused_before_any_io(query: str) -> None:
    url = f"postgresql://u:pw-secret@127.0.0.1:1/db?namespace=x{query}"
    if query == "&pooler=":  # empty: a direct connection, no error
        assert PostgresWorld(url).pooler is None
        return
    with pytest.raises(ConfigurationError) as err:
        PostgresWorld(url)
    assert "pw-secret" not in str(err.value)


def test_the_connection_budget_is_stated() -> None:
    w = PostgresWorld("postgresql://u@127.0.0.1:1/db?pool_size=4&pooler=transaction")
    assert w.connection_budget == 4 + 3  # calls, plus listener, notifier and setup
    assert w.pooler == "transaction"
    assert PostgresWorld("postgresql://u@127.0.0.1:1/db").connection_budget == 5 + 3
