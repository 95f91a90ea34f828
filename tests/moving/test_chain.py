"""A session moved SQLite -> PostgreSQL -> Redis -> S3 -> SQLite with ``fxworld copy``
keeps every position, kind and data, its takeovers in order, the engine's keys and
its pending wake; the kit's history checkers pass on every world of the chain, and
a worker on the last one takes over and answers the prompt that was waiting."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fxworld import Agent, NewEntry, open_world
from fxworld.cli import main
from fxworld.testing import ScriptedModel
from tests.moving.logs import SESSIONS, fill, kit_findings, logs_of, lookup, same_log

pytestmark = pytest.mark.timeout(120)


def test_a_chain_of_copies_keeps_the_sessions(
    tmp_path: Path, pg_url: str, redis_url: str, s3_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first, last = f"sqlite:///{tmp_path}/first.db", f"sqlite:///{tmp_path}/last.db"
    asyncio.run(_filled(first))
    named = [a for sid in SESSIONS for a in ("--session", sid)]
    hops = [(first, pg_url, []), (pg_url, redis_url, []), (redis_url, s3_url, []),
            (s3_url, last, named)]  # fmt: skip
    for source, target, sessions in hops:
        assert main(["copy", "--from", source, "--to", target, "--verify", *sessions]) == 0
        err = capsys.readouterr().err
        assert "copied 4 of 4 sessions" in err and "verified: 4 sessions match" in err, err
        assert "entries/s" not in err  # no bar: stdout is not a terminal
    asyncio.run(_check_chain(first, [pg_url, redis_url, s3_url, last]))


async def _filled(url: str) -> None:
    world = open_world(url)
    await world.setup()
    try:
        await fill(world)
    finally:
        await world.close()


async def _check_chain(first: str, copies: list[str]) -> None:
    source = open_world(first)
    try:
        logs = await logs_of(source, SESSIONS)
    finally:
        await source.close()
    for url in copies:
        world = open_world(url)
        try:
            copied = await logs_of(world, SESSIONS)
            for sid in SESSIONS:
                same_log(copied[sid], logs[sid])
            assert kit_findings(copied) == []
        finally:
            await world.close()
    await _take_over(copies[-1], copied)


async def _take_over(url: str, copied: dict[str, list]) -> None:  # type: ignore[type-arg]
    world = open_world(url)
    try:
        # The engine's keys came along: retrying a prompt or a decision writes nothing.
        chat, keyed = len(copied["chat"]), len(copied["keyed"])
        again = await world.append("chat", [NewEntry("prompt", {"v": 1, "text": "And A-2?",
                                   "key": "p2"})], key="prompt:p2")  # fmt: skip
        assert again == next(e.seq for e in copied["chat"] if e.data.get("key") == "p2")
        decided = NewEntry("approval.decided", {"v": 2, "execution_id": "x1", "approved": False})
        assert await world.append("keyed", [decided], key="approval:x1") <= keyed
        assert len(await world.read("chat", chat)) == len(await world.read("keyed", keyed)) == 0
        # A takeover on the target has an epoch above every epoch of the copy.
        for sid, log in copied.items():
            high = max((e.epoch for e in log if e.epoch is not None), default=0)
            if sid != "chat":
                assert (await world.acquire(sid)).epoch > high
        # The pending wake came along: a worker answers the waiting prompt.
        model = ScriptedModel([{"tool": "lookup", "input": {"order": "A-1"}}, "shipped", "A-2 too"])
        await Agent(model, tools=[lookup], world=world).work(until_idle=True)
        ended = (await world.read("chat", chat))[-1]
        assert (ended.kind, ended.data["text"]) == ("turn.finished", "A-2 too")
        fences = [e.epoch for e in await world.read("chat") if e.kind == "fence"]
        assert fences == sorted(set(fences)) and len(fences) == 2
    finally:
        await world.close()
