"""docs/contract.md section 3 for PostgresWorld: typed constructor, from_url, the app's own
engine, world(PostgresWorld(dsn)), errors and credentials. A real local server."""

from __future__ import annotations

import asyncio
import socket
import uuid
from typing import Any

import pytest

from fxworld import NewEntry, World, open_world, world
from fxworld.errors import (
    BackendUnavailable,
    ConfigurationError,
    InvalidEntry,
    InvalidSessionId,
    WorldError,
)
from fxworld_postgres import PostgresWorld


def ns() -> str:
    return f"c_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def dsn(postgres_server: Any) -> str:
    url: str = postgres_server.url
    return url


async def _roundtrip(w: World) -> int:
    await w.setup()
    try:
        return await w.append("s", [NewEntry("k", {"x": 1})])
    finally:
        await w.close()


async def test_typed_constructor_and_from_url(dsn: str) -> None:
    assert await _roundtrip(PostgresWorld(dsn, namespace=ns())) == 1
    assert await _roundtrip(PostgresWorld.from_url(f"{dsn}?namespace={ns()}")) == 1
    asyncpg_url = dsn.replace("postgresql://", "postgresql+asyncpg://", 1)
    assert await _roundtrip(PostgresWorld.from_url(f"{asyncpg_url}?namespace={ns()}")) == 1
    made = open_world(f"{dsn}?namespace={ns()}")
    assert isinstance(made, PostgresWorld) and isinstance(made, World)
    assert {"durable", "shared"} <= made.capabilities


async def test_world_uses_the_object_as_is(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("fxworld.selection._current", None)
    mine = PostgresWorld(dsn, namespace=ns())
    assert world(mine) is mine and world() is mine
    await mine.close()


async def test_accepts_the_applications_engine(dsn: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(dsn.replace("postgresql://", "postgresql+asyncpg://", 1))
    try:
        w = PostgresWorld(engine, namespace=ns())
        assert await _roundtrip(w) == 1
        async with engine.connect() as conn:  # closing the world left the app's engine alone
            assert (await conn.execute(text("select 1"))).scalar() == 1
    finally:
        await engine.dispose()


async def test_namespaces_isolate_on_one_server(dsn: str) -> None:
    a = PostgresWorld(dsn, namespace=ns())
    b = PostgresWorld(dsn, namespace=ns())
    await a.setup()
    await b.setup()
    try:
        await a.append("s", [NewEntry("k", {})], key="k", wake=0)
        assert await b.read("s") == []
        assert await b.take_wake(lease=5) is None
        assert (await b.acquire("s")).seq == 1
    finally:
        await a.close()
        await b.close()


def test_usable_from_two_asyncio_runs(dsn: str) -> None:
    w = PostgresWorld(dsn, namespace=ns())

    async def first() -> int:
        await w.setup()
        return await w.append("s", [NewEntry("k", {})])

    async def second() -> int:
        try:
            return await w.append("s", [NewEntry("k", {})])
        finally:
            await w.close()

    assert asyncio.run(first()) == 1
    assert asyncio.run(second()) == 2


async def test_before_setup_works_or_says_setup(dsn: str) -> None:
    w = PostgresWorld(dsn, namespace=ns())
    try:
        await w.append("s", [NewEntry("k", {})])
    except ConfigurationError as e:
        assert "setup" in str(e)
    finally:
        await w.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_unreachable_server_is_backend_unavailable_without_password() -> None:
    url = f"postgresql://alice:pw9secret@127.0.0.1:{_closed_port()}/db?namespace=x"
    w = open_world(url)
    assert "pw9secret" not in repr(w)
    try:
        with pytest.raises(BackendUnavailable) as info:
            await w.append("s", [NewEntry("k", {})])
    finally:
        await w.close()
    assert isinstance(info.value, ConnectionError) and isinstance(info.value, WorldError)
    assert "pw9secret" not in str(info.value) and "pw9secret" not in repr(info.value)


async def test_bad_input_refused_before_any_io() -> None:
    # the server is unreachable: W15 errors still come first, not BackendUnavailable
    w = open_world(f"postgresql://u:pw@127.0.0.1:{_closed_port()}/db?namespace=x")
    try:
        with pytest.raises(InvalidSessionId):
            await w.append("../x", [NewEntry("k", {})])
        with pytest.raises(InvalidEntry):
            await w.append("ok", [NewEntry("fence", {})])
        with pytest.raises(InvalidSessionId):
            await w.read("a b")
    finally:
        await w.close()


@pytest.mark.parametrize("first", ["append", "acquire", "read", "follow", "take_wake", "wake"])
async def test_a_world_used_without_setup_sets_its_namespace_up(dsn: str, first: str) -> None:
    """`world(PostgresWorld(dsn))` users may never call setup(): the first call of any
    kind creates the namespace and then does what it was asked."""
    w = PostgresWorld(dsn, namespace=ns())
    try:
        if first == "append":
            assert await w.append("s", [NewEntry("k", {})], wake=0) == 1
        elif first == "acquire":
            assert (await w.acquire("s")).epoch == 1
        elif first == "read":
            assert await w.read("s") == []
        elif first == "follow":
            follower = w.follow("s")
            waiting = asyncio.ensure_future(anext(follower))
            await asyncio.sleep(0.2)
            other = PostgresWorld(dsn, namespace=w.namespace)
            await other.append("s", [NewEntry("k", {"n": 1})])
            await other.close()
            assert (await asyncio.wait_for(waiting, timeout=10)).data == {"n": 1}
            await follower.aclose()
        elif first == "take_wake":
            assert await w.take_wake(lease=5) is None
        else:
            await w.wake("s")
            assert (await w.take_wake(lease=5)) is not None
        assert [e.seq for e in await w.read("s")] in ([], [1])
    finally:
        await w.close()
