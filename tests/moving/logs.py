"""Source logs for the moving tests, and what a faithful copy of them must show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fxworld import Agent, NewEntry, SqliteWorld, World
from fxworld.testing import ScriptedModel
from fxworld.types import Entry
from fxworld_conformance.checkers import check_dense, check_epochs
from fxworld_conformance.checkers.history import History, entry_dicts

__all__ = [
    "fill",
    "fill_sqlite",
    "lookup",
    "SESSIONS",
    "whole",
    "logs_of",
    "kit_findings",
    "same_log",
    "same_sqlite",
]

SESSIONS = ["chat", "keyed", "long", "renumbered"]
"""The sessions :func:`fill` writes, in list order."""


def lookup(order: str) -> str:
    """Look up an order."""
    return f"order {order}: shipped"


async def fill(world: World) -> None:
    """Sessions of every shape a copy must reproduce:

    - ``chat``: a real turn run by the engine (a prompt, a takeover, a tool call, the
      answer), then a second prompt no worker answered yet (it owes a wake);
    - ``keyed``: an approval decision and a stop, keyed as the engine keys them;
    - ``long``: 700 entries in fenced and unfenced runs, over several batches;
    - ``renumbered``: a session deleted and begun again, so its epochs start at 2
      (not dense from 1), with two takeovers.
    """
    agent = Agent(ScriptedModel([{"tool": "lookup", "input": {"order": "A-1"}}, "shipped"]),
                  tools=[lookup], world=world)  # fmt: skip
    await agent.session("chat").prompt("Where is A-1?", key="p1").accepted
    await agent.work(until_idle=True)
    await agent.session("chat").prompt("And A-2?", key="p2").accepted  # nobody answers: owes a wake
    await world.append("keyed", [NewEntry("prompt", {"v": 1, "text": "hi", "key": "k"})],
                       key="prompt:k")  # fmt: skip
    f = await world.acquire("keyed")
    await world.append("keyed", [NewEntry("turn.started", {"v": 1, "prompt": 1, "turn": "t"})],
                       fence=f)  # fmt: skip
    decided = {"v": 2, "execution_id": "x1", "approved": True, "note": None}
    await world.append("keyed", [NewEntry("approval.decided", decided)], key="approval:x1")
    stop = {"v": 2, "prompt": 1, "reason": "enough"}
    await world.append("keyed", [NewEntry("stop.requested", stop)], key="stop:1")
    await world.append("keyed", [NewEntry("turn.stopped", {"v": 2, "prompt": 1, "turn": "t"})],
                       fence=f)  # fmt: skip
    for run in range(7):
        fence = await world.acquire("long") if run % 2 else None
        notes = [NewEntry("note", {"run": run, "i": i, "pad": "x" * 40}) for i in range(99)]
        await world.append("long", notes, fence=fence)
    await world.acquire("renumbered")
    await world.delete("renumbered")
    for _ in range(2):
        f = await world.acquire("renumbered")
        await world.append("renumbered", [NewEntry("note", {"epoch_was": f.epoch})], fence=f)


async def whole(world: World, sid: str) -> list[Entry]:
    out: list[Entry] = []
    while page := await world.read(sid, out[-1].seq if out else 0, limit=1000):
        out.extend(page)
    return out


async def logs_of(world: World, ids: list[str]) -> dict[str, list[Entry]]:
    return {sid: await whole(world, sid) for sid in ids}


def kit_findings(logs: dict[str, list[Entry]]) -> list[Any]:
    """The kit's history checkers of dense positions and monotone epochs, on the logs."""
    history = History(ops=[], final={sid: entry_dicts(log) for sid, log in logs.items()})
    return [f.render() for f in (*check_dense(history), *check_epochs(history))]


def same_log(copy: list[Entry], source: list[Entry]) -> None:
    """Position by position the same kind and data, the same entries fenced, and
    each takeover's epoch above the one before (its number may differ)."""
    assert [(e.seq, e.kind) for e in copy] == [(e.seq, e.kind) for e in source]
    for c, s in zip(copy, source, strict=True):
        assert (c.epoch is None) == (s.epoch is None), (c, s)
        if c.kind != "fence":
            assert c.data == s.data, (c, s)


async def fill_sqlite(path: Path) -> None:
    """:func:`fill` a SQLite world at ``path``."""
    world = SqliteWorld(path)
    try:
        await fill(world)
    finally:
        await world.close()


async def same_sqlite(source: Path, target: Path) -> None:
    """The SQLite world at ``target`` holds a faithful copy of :func:`fill`'s sessions
    at ``source``, and the waiting prompt's wake."""
    a, b = SqliteWorld(source), SqliteWorld(target)
    try:
        ours, theirs = await logs_of(a, SESSIONS), await logs_of(b, SESSIONS)
        for sid in SESSIONS:
            same_log(theirs[sid], ours[sid])
        assert kit_findings(theirs) == []
        wake = await b.take_wake(lease=5.0)  # the unanswered prompt's wake came along
        assert wake is not None and wake.session_id == "chat"
    finally:
        await a.close()
        await b.close()
