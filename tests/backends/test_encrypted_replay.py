"""A sealed entry replayed in its own session (issue 34 item 4): every entry an
EncryptedWorld writes has its seq bound into its seal, so a copy of it anywhere
else in the session is refused on read, and a worker does not run the turn again."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from fxworld import Agent, EncryptedWorld, NewEntry, SqliteWorld, ToolContext, tool
from fxworld.encryption.envelope import Sealed, entry_ad, seal, to_data
from fxworld.errors import TamperedEntry
from fxworld.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)

KEY = os.urandom(32)


def copy_row(path: Path, sid: str, seq: int, to: int) -> None:
    """Copy entry ``seq`` of ``sid`` to position ``to`` as someone with write access
    to the database can: appended at the end, or over another entry."""
    with sqlite3.connect(path) as db:
        kind, data, epoch = db.execute(
            "SELECT kind, data, epoch FROM fx_entries WHERE session_id=? AND seq=?", (sid, seq)
        ).fetchone()
        db.execute(
            "INSERT OR REPLACE INTO fx_entries (namespace, session_id, seq, kind, data, epoch, at)"
            " VALUES ('default', ?, ?, ?, ?, ?, 0)",
            (sid, to, kind, data, epoch),
        )
        db.execute(
            "UPDATE fx_sessions SET last_seq = max(last_seq, ?) WHERE session_id=?", (to, sid)
        )


def stored_field(path: Path, sid: str, seq: int, name: str) -> object:
    with sqlite3.connect(path) as db:
        (value,) = db.execute(
            "SELECT json_extract(data, ?) FROM fx_entries WHERE session_id=? AND seq=?",
            (f"$.{name}", sid, seq),
        ).fetchone()
    return value


async def test_encrypted_world_accepts_a_replayed_entry(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    refunds: list[str] = []

    @tool
    async def refund_order(ctx: ToolContext, order_id: str) -> str:
        refunds.append(order_id)
        return f"refunded {order_id}"

    replies = [{"tool": "refund_order", "input": {"order_id": "A-1"}}, "Refunded."]
    world = EncryptedWorld(SqliteWorld(path), KEY)
    agent = Agent(ScriptedModel(replies * 3), tools=[refund_order], world=world)
    try:
        turn = agent.session("s").prompt("refund A-1")
        await asyncio.wait_for(agent.work(until_idle=True, lease=10.0), 30)
        assert await turn.result() == "Refunded." and refunds == ["A-1"]
        entries = await world.read("s")
        assert entries[0].kind == "prompt"
        # The Quickstart's path (session.prompt(), unfenced, with a key) binds the
        # prompt's position too, as does every entry the engine writes.
        assert {stored_field(path, "s", e.seq, "s") for e in entries if e.kind != "fence"} == {1}

        last = entries[-1].seq
        copy_row(path, "s", 1, last + 1)  # the prompt, replayed at the end
        await world.inner.wake("s")
        with pytest.raises(TamperedEntry) as info:
            await world.read("s")
        assert info.value.seq == last + 1
        with pytest.raises(TamperedEntry):
            await world.read("s", last)  # a reader of the tail alone refuses it too
        await asyncio.wait_for(agent.work(until_idle=True, lease=10.0), 30)
        assert refunds == ["A-1"]  # the refund did not run again

        copy_row(path, "s", 1, last)  # over another entry, in the middle of the log
        with pytest.raises(TamperedEntry) as info:
            await world.read("s", last - 1, limit=1)
        assert info.value.seq == last
        assert [e.seq for e in await world.read("s", limit=last - 1)] == list(range(1, last))
    finally:
        await world.close()


async def test_appends_without_expect_bind_their_seq_and_still_always_land(
    tmp_path: Path,
) -> None:
    """Two objects on one store append to one session without expect=: each
    guesses the position, is told the right one by a Conflict when the other came
    first, and lands (W3); a repeated key returns where it landed (W6)."""
    path = tmp_path / "w.db"
    one, two = EncryptedWorld(SqliteWorld(path), KEY), EncryptedWorld(SqliteWorld(path), KEY)
    try:
        seqs = await asyncio.gather(
            *(w.append("s", [NewEntry("msg", {"n": n})]) for n in range(20) for w in (one, two))
        )
        assert sorted(seqs) == list(range(1, 41))
        assert await two.append("s", [NewEntry("msg", {"n": 0})], key="k") == 41
        assert await one.append("s", [NewEntry("msg", {"n": 0})], key="k") == 41
        fence = await one.acquire("s")
        await two.append("s", [NewEntry("msg", {"n": "between"})])
        assert await one.append("s", [NewEntry("msg", {"n": 1})], fence=fence) == 44
        await two.delete("s")
        assert await one.append("s", [NewEntry("msg", {"n": "again"})]) == 1
        assert [e.data for e in await two.read("s")] == [{"n": "again"}]
        assert {stored_field(path, "s", 1, "s")} == {1}
    finally:
        await one.close()
        await two.close()


async def test_entries_sealed_without_their_seq_by_an_earlier_version_still_read(
    tmp_path: Path,
) -> None:
    """What was chosen for old data: an entry an earlier version appended without
    ``expect=`` (``"s": 0``) still reads, bound to its session, kind and epoch as
    before (docs/encryption.md says a copy of it within its session is not seen)."""
    w = EncryptedWorld(SqliteWorld(tmp_path / "w.db"), KEY)
    try:
        await w.append("s", [NewEntry("msg", {"n": 1})])
        data_key_id, cipher = await w.data_keys.for_writing("s")
        fields = Sealed(w.keyring.current, data_key_id, False, b"", b"")
        ad = entry_ad(w.namespace, "s", "msg", None, None, fields)
        nonce, ciphertext = seal(cipher, json.dumps({"n": 2}).encode(), ad)
        old = to_data(replace(fields, nonce=nonce, ciphertext=ciphertext))
        await w.inner.append("s", [NewEntry("msg", old)])
        assert [e.data for e in await w.read("s")] == [{"n": 1}, {"n": 2}]
        await w.inner.append("s", [NewEntry("note", old)])  # another kind: refused
        with pytest.raises(TamperedEntry):
            await w.read("s", 2)
    finally:
        await w.close()
