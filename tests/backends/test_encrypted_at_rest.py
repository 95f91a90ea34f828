"""What EncryptedWorld protects, on real worlds: rows rewritten with SQL in SQLite
and PostgreSQL, entries moved to another session, namespace or position, key
rotation, crypto-shredding, racing creation of data keys, and bad keys."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from fxworld import EncryptedWorld, MemoryWorld, NewEntry, SqliteWorld, World, take_wakes
from fxworld.encryption import keys_from_env
from fxworld.encryption.datakeys import key_session
from fxworld.errors import (
    ConfigurationError,
    EntryTooLarge,
    InvalidSessionId,
    MissingKey,
    TamperedEntry,
)
from fxworld.protocol import (
    IdleDeleter,
    LastEntryReader,
    SessionLister,
    WakeBatcher,
    WakeLister,
)
from fxworld_conformance import Target
from fxworld_conformance.broken import KeyIgnored, StaleFenceAccepted
from fxworld_conformance.guarantees import SCENARIOS
from fxworld_conformance.runner import run_check
from fxworld_postgres import PostgresWorld
from tests.support.namespaces import fresh_namespace
from tests.support.postgres_server import PostgresServer

K1, K2 = os.urandom(32), os.urandom(32)


class Rows:
    """Direct SQL access to the stored entries of one backend, bypassing fxworld."""

    async def get(self, ns: str, sid: str, seq: int) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    async def put(self, ns: str, sid: str, seq: int, kind: str, data: dict[str, Any]) -> None:
        raise NotImplementedError


class SqliteRows(Rows):
    def __init__(self, path: Path) -> None:
        self.path = path

    async def get(self, ns: str, sid: str, seq: int) -> tuple[str, dict[str, Any]]:
        with sqlite3.connect(self.path) as db:
            kind, data = db.execute(
                "SELECT kind, data FROM fx_entries WHERE namespace=? AND session_id=? AND seq=?",
                (ns, sid, seq),
            ).fetchone()
        return kind, json.loads(data)

    async def put(self, ns: str, sid: str, seq: int, kind: str, data: dict[str, Any]) -> None:
        with sqlite3.connect(self.path) as db:
            done = db.execute(
                "UPDATE fx_entries SET kind=?, data=? WHERE namespace=? AND session_id=? AND seq=?",
                (kind, json.dumps(data), ns, sid, seq),
            )
            assert done.rowcount == 1


class PostgresRows(Rows):
    def __init__(self, url: str) -> None:
        self.url = url

    async def get(self, ns: str, sid: str, seq: int) -> tuple[str, dict[str, Any]]:
        conn = await asyncpg.connect(self.url)
        try:
            row = await conn.fetchrow(
                f'SELECT kind, coalesce(raw, data::text) AS d FROM "fxworld_{ns}".entries '
                "WHERE session_id = $1 AND seq = $2",
                sid,
                seq,
            )
        finally:
            await conn.close()
        return row["kind"], json.loads(row["d"])

    async def put(self, ns: str, sid: str, seq: int, kind: str, data: dict[str, Any]) -> None:
        conn = await asyncpg.connect(self.url)
        try:
            done = await conn.execute(
                f'UPDATE "fxworld_{ns}".entries SET kind = $1, data = $2::jsonb, raw = NULL '
                "WHERE session_id = $3 AND seq = $4",
                kind,
                json.dumps(data),
                sid,
                seq,
            )
        finally:
            await conn.close()
        assert done == "UPDATE 1"


@dataclass
class Backend:
    open: Callable[[str], World]
    """A namespace -> a fresh inner world object on the shared store."""
    rows: Rows


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        path = tmp_path / "w.db"
        return Backend(lambda ns: SqliteWorld(path, namespace=ns), SqliteRows(path))
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return Backend(lambda ns: PostgresWorld(server.url, namespace=ns), PostgresRows(server.url))


@pytest.fixture
async def opened() -> AsyncIterator[list[World]]:
    """Worlds a test opens, closed at its end."""
    worlds: list[World] = []
    yield worlds
    for w in worlds:
        await w.close()


def encrypted(backend: Backend, opened: list[World], ns: str, keys: Any = K1) -> EncryptedWorld:
    w = EncryptedWorld(backend.open(ns), keys)
    opened.append(w)
    return w


def flip(text: str) -> str:
    """``text`` (base64) with one bit of its first byte changed."""
    raw = bytearray(base64.b64decode(text))
    raw[0] ^= 1
    return base64.b64encode(bytes(raw)).decode()


async def test_a_row_rewritten_with_sql_is_refused(backend: Backend, opened: list[World]) -> None:
    ns = fresh_namespace("enc")
    w = encrypted(backend, opened, ns)
    await w.setup()
    fence = await w.acquire("s")
    await w.append("s", [NewEntry("msg", {"secret": "hunter2"})], fence=fence)
    await w.append("s", [NewEntry("msg", {"n": 3})])
    kind, stored = await backend.rows.get(ns, "s", 2)
    assert kind == "msg" and "hunter2" not in json.dumps(stored)  # kinds stay visible
    forgeries: list[tuple[str, dict[str, Any], str]] = [
        ("msg", {**stored, "c": flip(stored["c"])}, "authentication failed"),
        ("msg", {"secret": "forged"}, "not sealed"),  # a forged plaintext row
        ("note", stored, "authentication failed"),  # the kind is bound
        ("msg", {**stored, "s": 0}, "authentication failed"),  # claims an unbound seq
        ("msg", {**stored, "k": "other"}, "not among the keys"),
    ]
    for forged_kind, forged, why in forgeries:
        await backend.rows.put(ns, "s", 2, forged_kind, forged)
        with pytest.raises((TamperedEntry, MissingKey), match=why) as info:
            await w.read("s")
        assert info.value.seq == 2 and "hunter2" not in str(info.value)
        assert [e.data for e in await w.read("s", 2)] == [{"n": 3}]  # the rest still reads
    await backend.rows.put(ns, "s", 1, "fence", {"epoch": fence.epoch + 1})
    with pytest.raises(TamperedEntry, match="fence entry"):
        await w.read("s", 0, limit=1)
    await backend.rows.put(ns, "s", 1, "fence", {"epoch": fence.epoch})
    await backend.rows.put(ns, "s", 2, kind, stored)
    assert [e.data for e in await w.read("s")][1:] == [{"secret": "hunter2"}, {"n": 3}]


async def test_an_entry_moved_to_another_session_namespace_or_position_is_refused(
    backend: Backend, opened: list[World]
) -> None:
    ns, other_ns = fresh_namespace("enc"), fresh_namespace("enc")
    w, other = encrypted(backend, opened, ns), encrypted(backend, opened, other_ns)
    await w.setup()
    await other.setup()
    for target, sid in ((w, "a"), (w, "b"), (other, "a")):
        await target.append(sid, [NewEntry("msg", {"of": sid}), NewEntry("msg", {"n": 2})])
    _, a1 = await backend.rows.get(ns, "a", 1)
    await backend.rows.put(ns, "b", 1, "msg", a1)  # same kind, seq and epoch, another session
    with pytest.raises(TamperedEntry, match="moved from another session"):
        await w.read("b")
    await backend.rows.put(other_ns, "a", 1, "msg", a1)  # same session id, another namespace
    with pytest.raises(TamperedEntry):
        await other.read("a")
    # Every entry has its seq bound, with or without the caller's expect=: swapping
    # two entries of one session, kind and epoch is refused.
    await w.append("c", [NewEntry("msg", {"n": 1}), NewEntry("msg", {"n": 2})], expect=0)
    for sid in ("a", "c"):
        (_, one), (_, two) = await backend.rows.get(ns, sid, 1), await backend.rows.get(ns, sid, 2)
        await backend.rows.put(ns, sid, 1, "msg", two)
        await backend.rows.put(ns, sid, 2, "msg", one)
        with pytest.raises(TamperedEntry) as info:
            await w.read(sid)
        assert info.value.seq == 1


async def test_racing_first_appends_make_exactly_one_data_key_per_session(
    backend: Backend, opened: list[World]
) -> None:
    ns = fresh_namespace("enc")
    one, two = encrypted(backend, opened, ns), encrypted(backend, opened, ns)
    await one.setup()
    sessions = [f"s{i}" for i in range(12)]
    firsts = [
        w.append(sid, [NewEntry("msg", {"by": n})])
        for sid in sessions
        for n, w in ((0, one), (1, two))
    ]
    await asyncio.gather(*firsts)
    third = encrypted(backend, opened, ns)
    for sid in sessions:
        assert len(await third.inner.read(key_session(ns, sid))) == 1  # one winner (W5)
        assert sorted(e.data["by"] for e in await third.read(sid)) == [0, 1]


async def test_rotation_new_entries_use_the_new_key_old_ones_still_read(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    before = EncryptedWorld(SqliteWorld(path), {"k1": K1})
    await before.append("s", [NewEntry("msg", {"n": 1})])
    await before.close()
    rotated = EncryptedWorld(SqliteWorld(path), {"k2": K2, "k1": K1})
    await rotated.append("s", [NewEntry("msg", {"n": 2})])
    await rotated.append("t", [NewEntry("msg", {"n": 3})])
    assert [e.data for e in await rotated.read("s")] == [{"n": 1}, {"n": 2}]
    rows = SqliteRows(path)
    assert [(await rows.get("default", "s", n))[1]["k"] for n in (1, 2)] == ["k1", "k2"]
    await rotated.close()
    retired = EncryptedWorld(SqliteWorld(path), {"k2": K2})  # k1 dropped too early
    try:
        assert [e.data for e in await retired.read("t")] == [{"n": 3}]
        with pytest.raises(MissingKey, match="key id 'k1', which is not among") as info:
            await retired.read("s")
        assert (info.value.key_id, info.value.seq) == ("k1", 1)
        assert [e.data for e in await retired.read("s", 1)] == [{"n": 2}]
    finally:
        await retired.close()


async def test_shredding_a_sessions_data_keys_makes_every_copy_unreadable(tmp_path: Path) -> None:
    keys_db, data_db, backup_db = tmp_path / "keys.db", tmp_path / "data.db", tmp_path / "b.db"
    w = EncryptedWorld(SqliteWorld(data_db), K1, key_world=SqliteWorld(keys_db))
    for sid in ("erase-me", "keep-me"):
        await w.append(sid, [NewEntry("msg", {"of": sid})], key="k", wake=0)
    await w.close()
    shutil.copy(data_db, backup_db)  # a backup of the data, taken before the erasure
    w = EncryptedWorld(SqliteWorld(data_db), K1, key_world=SqliteWorld(keys_db))
    await w.shred("erase-me")
    assert await w.read("erase-me") == []
    assert [e.data for e in await w.read("keep-me")] == [{"of": "keep-me"}]
    await w.shred("erase-me")  # again: nothing left, no error
    await w.append("erase-me", [NewEntry("msg", {"n": 1})])  # starts again, under a new key
    assert [e.data for e in await w.read("erase-me")] == [{"n": 1}]
    await w.close()
    restored = EncryptedWorld(SqliteWorld(backup_db), K1, key_world=SqliteWorld(keys_db))
    try:
        with pytest.raises(MissingKey, match="shredded"):
            await restored.read("erase-me")
        assert [e.data for e in await restored.read("keep-me")] == [{"of": "keep-me"}]
    finally:
        await restored.close()


async def test_namespaces_can_keep_their_keys_in_one_key_world(tmp_path: Path) -> None:
    keys_db, data_db = tmp_path / "keys.db", tmp_path / "data.db"
    tenants = {
        ns: EncryptedWorld(SqliteWorld(data_db, namespace=ns), K1, key_world=SqliteWorld(keys_db))
        for ns in ("a", "b")
    }
    try:
        for ns, w in tenants.items():
            await w.append("s", [NewEntry("msg", {"of": ns})])
        await tenants["a"].shred("s")
        assert await tenants["a"].read("s") == []
        assert [e.data for e in await tenants["b"].read("s")] == [{"of": "b"}]
    finally:
        for w in tenants.values():
            await w.close()


async def test_shredding_with_companion_sessions_and_delete_keeping_the_key(
    tmp_path: Path,
) -> None:
    w = EncryptedWorld(SqliteWorld(tmp_path / "w.db"), K1)
    try:
        for sid in ("a", "b"):
            await w.append(sid, [NewEntry("msg", {"of": sid})])
        assert await w.list_sessions() == ["a", "b"]  # companions are hidden
        assert len(await w.inner.read(key_session("default", "a"))) == 1
        await w.delete("a")  # W14: the log goes, the data key stays for racing writers
        assert await w.read("a") == [] and len(await w.inner.read(key_session("default", "a"))) == 1
        await w.append("a", [NewEntry("msg", {"n": 1})])
        await w.shred("a")
        assert await w.inner.read(key_session("default", "a")) == [] and await w.read("a") == []
        assert [e.data for e in await w.read("b")] == [{"of": "b"}]
        assert await w.list_sessions() == ["b"]
        for reserved in (key_session("default", "b"), "fxkey.x"):
            with pytest.raises(InvalidSessionId, match="data keys"):
                await w.append(reserved, [NewEntry("msg", {})])
            with pytest.raises(InvalidSessionId):
                await w.read(reserved)
    finally:
        await w.close()


def test_bad_keys_are_typed_errors_at_construction_and_never_shown() -> None:
    inner = MemoryWorld()
    secret = b"S" * 31
    for keys, why in [
        (secret, "must be 32 bytes"),
        ({"k": b"x" * 33}, "must be 32 bytes"),
        ({"k": "a" * 32}, "not bytes"),
        ({}, "at least one key"),
        ({"bad id!": K1}, "key id"),
        (["k", K1], "mapping"),
    ]:
        with pytest.raises(ConfigurationError, match=why) as info:
            EncryptedWorld(inner, keys)
        assert "SSSS" not in str(info.value) and "aaaa" not in str(info.value)
    w = EncryptedWorld(inner, {"new": K1, "old": K2})
    assert repr(w) == "EncryptedWorld(MemoryWorld(namespace='default'), key_ids=['new', 'old'])"
    for shown in (repr(w), repr(w.keyring), repr(w.data_keys.cache), str(vars(w))):
        assert K1.hex() not in shown and repr(K1) not in shown


def test_keys_from_an_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    encoded = base64.b64encode(K1).decode()
    monkeypatch.setenv(
        "FXWORLD_ENCRYPTION_KEYS", f"k2:{base64.b64encode(K2).decode()},k1:{encoded}"
    )
    assert keys_from_env() == {"k2": K2, "k1": K1}
    assert EncryptedWorld.from_env(MemoryWorld()).keyring.ids == ["k2", "k1"]
    monkeypatch.setenv("MY_KEY", encoded)
    assert keys_from_env("MY_KEY") == {"default": K1}
    monkeypatch.setenv("MY_KEY", "k1:" + encoded[:-4])
    with pytest.raises(ConfigurationError, match="32 bytes"):
        EncryptedWorld.from_env(MemoryWorld(), "MY_KEY")
    monkeypatch.setenv("MY_KEY", "k1:not base64!")
    with pytest.raises(ConfigurationError, match="MY_KEY: key number 1 is not base64") as info:
        keys_from_env("MY_KEY")
    assert "not base64!" not in str(info.value).split(":", 1)[1]
    monkeypatch.delenv("MY_KEY")
    with pytest.raises(ConfigurationError, match="MY_KEY is not set"):
        keys_from_env("MY_KEY")


async def test_the_size_limit_is_on_the_plaintext_and_its_seal_fits_the_inner_world(
    tmp_path: Path,
) -> None:
    w = EncryptedWorld(SqliteWorld(tmp_path / "w.db", max_entry_bytes=2000), {"longer-id": K1})
    try:
        fits = {"x": "y" * (w.max_entry_bytes - len('{"x":""}'))}
        assert await w.append("s", [NewEntry("msg", fits)]) == 1
        assert (await w.read("s"))[0].data == fits
        with pytest.raises(EntryTooLarge) as info:
            await w.append("s", [NewEntry("msg", {"x": "y" * w.max_entry_bytes})])
        assert info.value.limit == w.max_entry_bytes < 2000
        assert len(await w.read("s")) == 1
    finally:
        await w.close()
    with pytest.raises(ConfigurationError, match="no room"):
        EncryptedWorld(SqliteWorld(tmp_path / "x.db", max_entry_bytes=100), K1)


class ProtocolOnly:
    """A world with the World methods only: none of the optional protocols."""

    def __init__(self) -> None:
        self.w = MemoryWorld()
        self.capabilities = self.w.capabilities
        for name in ("setup", "close", "acquire", "append", "read", "follow", "wake",
                     "take_wake", "renew_wake", "finish_wake", "delete"):  # fmt: skip
            setattr(self, name, getattr(self.w, name))


async def test_the_optional_protocols_are_there_exactly_when_the_inner_world_has_them(
    tmp_path: Path,
) -> None:
    protocols = (WakeBatcher, SessionLister, WakeLister, LastEntryReader, IdleDeleter)
    bare: Any = ProtocolOnly()
    for inner in (MemoryWorld(), SqliteWorld(tmp_path / "w.db"), bare):
        w = EncryptedWorld(inner, K1)
        assert [isinstance(w, p) for p in protocols] == [isinstance(inner, p) for p in protocols]
        await w.wake("s")
        assert [lease.session_id for lease in await take_wakes(w, lease=5)] == ["s"]
        await w.close()
    assert not any(isinstance(EncryptedWorld(bare, K1), p) for p in protocols)


def test_importing_fxworld_loads_no_cryptography() -> None:
    code = "import sys, fxworld, fxworld.validate; print('cryptography' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("broken", "check"),
    [(StaleFenceAccepted, "w02-fenced-append"), (KeyIgnored, "w06-key")],
)
def test_the_wrapper_hides_no_bug_of_the_inner_world(broken: type[World], check: str) -> None:
    """The kit still fails a broken inner world through EncryptedWorld: the wrapper
    forwards fence, key and wake as given (and expect=, its own when none is given),
    and adds no guarantee of its own."""
    name = next(s.name for s in SCENARIOS if s.id == check)
    rows = run_check(name, Target(factory=lambda: EncryptedWorld(broken(), K1)), profile="ci")
    assert [r.status for r in rows] == ["failed"], rows
