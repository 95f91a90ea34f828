"""Retention and copies of an EncryptedWorld, on real SQLite and PostgreSQL.

``fxworld.prune`` through the EncryptedWorld deletes idle sessions whole and keeps
busy ones (its ``last_entry`` and ``delete_if_idle`` are the inner world's, entries
opened as ``read`` opens them). ``fxworld.prune`` of the inner world, opened by
itself, keeps the companion sessions that hold the data keys (deleting them would
crypto-shred sessions still in use) and the sessions whose entries are sealed (it
cannot read their turns), and still deletes plain ones. A copy of the whole inner
world carries the companions, so the copy reads under the same keys.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import fxworld
from fxworld import Agent, EncryptedWorld, NewEntry, SqliteWorld, World
from fxworld.encryption.datakeys import key_session
from fxworld.errors import TamperedEntry
from fxworld.moving import copy_session, session_ids
from fxworld.protocol import IdleDeleter, LastEntryReader
from fxworld.testing import ScriptedModel
from fxworld_postgres import PostgresWorld
from tests.support.namespaces import fresh_namespace
from tests.support.postgres_server import PostgresServer

pytestmark = pytest.mark.timeout(90)

KEYS = {"k1": os.urandom(32)}
IDLE = 0.5  # seconds: what was written before the pause is "idle" after it


@dataclass
class Inner:
    open: Callable[[], World]
    """A fresh world object on the test's store (plain: no encryption)."""


@pytest.fixture(params=["sqlite", "postgres"])
async def inner(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Inner]:
    if request.param == "sqlite":
        yield Inner(lambda: SqliteWorld(tmp_path / "w.db"))
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    ns = fresh_namespace()
    yield Inner(lambda: PostgresWorld(server.url, namespace=ns))


async def _answered(world: World, sid: str) -> None:
    agent = Agent(ScriptedModel(["Hi."]), world=world)
    await agent.session(sid).prompt("my card ends in 4242").accepted
    await asyncio.wait_for(agent.work(until_idle=True, lease=10.0, poll_interval=0.02), 60)


async def test_prune_through_the_encrypted_world_deletes_idle_sessions_whole(
    inner: Inner,
) -> None:
    world = EncryptedWorld(inner.open(), KEYS)
    await world.setup()
    try:
        assert isinstance(world, LastEntryReader) and isinstance(world, IdleDeleter)
        for sid in ("old-1", "old-2"):
            await _answered(world, sid)
        await Agent(ScriptedModel([]), world=world).session("waiting").prompt("hi").accepted
        await asyncio.sleep(IDLE + 0.3)
        await world.append("fresh", [NewEntry("note", {"n": 1})])
        last = await world.last_entry("old-1")
        assert last is not None and last == (await world.read("old-1"))[-1]  # opened
        report = await fxworld.prune(world, idle_for=IDLE)
        assert sorted(report.deleted) == ["old-1", "old-2"]
        assert list(report.kept) == ["waiting"] and report.kept["waiting"].startswith("wake")
        assert report.scanned == 4  # the companions are not the EncryptedWorld's sessions
        for sid in ("old-1", "old-2"):
            assert await world.read(sid) == [] and await world.last_entry(sid) is None
        assert [e.kind for e in await world.read("waiting")][-1] == "prompt"
        # like delete, delete_if_idle keeps the data keys: a session started anew reads
        plain = inner.open()
        assert len(await plain.read(key_session(world.namespace, "old-1"))) == 1
        await plain.close()
        await world.append("old-1", [NewEntry("note", {"again": True})])
        assert [e.data for e in await world.read("old-1")] == [{"again": True}]
        # ("fresh", written before the first prune, may be idle by now on a slow machine)
        assert "old-1" not in (await fxworld.prune(world, idle_for=IDLE)).deleted
    finally:
        await world.close()


async def test_last_entry_is_refused_when_tampered_as_read_is(tmp_path: Path) -> None:
    world = EncryptedWorld(SqliteWorld(tmp_path / "w.db"), KEYS)
    other = SqliteWorld(tmp_path / "w.db")
    try:
        await world.append("a", [NewEntry("note", {"n": 1})])
        await world.append("b", [NewEntry("note", {"n": 2})])
        stored = (await other.read("b"))[0]
        await other.delete("a")
        await other.append("a", [NewEntry("note", stored.data)])  # b's sealed row, moved
        with pytest.raises(TamperedEntry):
            await world.read("a")
        with pytest.raises(TamperedEntry):
            await world.last_entry("a")
    finally:
        await world.close()
        await other.close()


async def test_prune_of_the_inner_world_keeps_the_data_keys_and_sealed_sessions(
    inner: Inner,
) -> None:
    world = EncryptedWorld(inner.open(), KEYS)
    plain = inner.open()
    await world.setup()
    try:
        await _answered(world, "answered")  # sealed turns: unreadable without the keys
        await world.append("live", [NewEntry("note", {"secret": 1})], wake=3600)
        await world.append("taken", [NewEntry("note", {"secret": 2})])
        await world.acquire("taken")  # its log ends with a plaintext fence entry
        await plain.append("plain", [NewEntry("note", {"n": 1})])  # not encrypted
        await asyncio.sleep(IDLE + 0.3)
        report = await fxworld.prune(plain, idle_for=IDLE)
        sealed = ["answered", "live", "taken"]
        companions = sorted(key_session(world.namespace, sid) for sid in sealed)
        assert report.deleted == ["plain"]
        assert sorted(report.kept) == sorted(companions + sealed)
        assert all("data keys" in report.kept[c] for c in companions)
        assert all(report.kept[sid].startswith("sealed by an EncryptedWorld") for sid in sealed)
        reader = EncryptedWorld(inner.open(), KEYS)  # no cached keys: reads the companions
        assert [e.data for e in await reader.read("live")] == [{"secret": 1}]
        assert [e.kind for e in await reader.read("answered")][-1] == "turn.finished"
        report = await fxworld.prune(reader, idle_for=IDLE)  # the way to prune them
        assert report.deleted == ["answered", "taken"] and list(report.kept) == ["live"]
        await reader.close()
    finally:
        await world.close()
        await plain.close()


async def test_a_copy_of_the_whole_inner_world_carries_the_data_keys(tmp_path: Path) -> None:
    world = EncryptedWorld(SqliteWorld(tmp_path / "a.db"), KEYS)
    source, target = SqliteWorld(tmp_path / "a.db"), SqliteWorld(tmp_path / "b.db")
    try:
        await world.append("chat", [NewEntry("note", {"text": "sealed"})])
        ids = await session_ids(source, None, "a.db")
        assert ids == sorted(["chat", key_session(world.namespace, "chat")])
        for sid in ids:
            await copy_session(source, target, sid)
        copy = EncryptedWorld(SqliteWorld(tmp_path / "b.db"), KEYS)
        assert [e.data for e in await copy.read("chat")] == [{"text": "sealed"}]
        await copy.close()
    finally:
        for w in (world, source, target):
            await w.close()
