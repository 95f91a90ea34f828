"""Targets for the import and copy tests: a world the CLI writes by URL and the test
then reads, on SQLite, in memory (one MemoryWorld shared by every open of its URL in
this process) or on Redis; files built line by line; the contents of a target."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fxworld import MemoryWorld, open_world
from fxworld.moving.derived import engine_key
from fxworld.moving.records import end_line, entry_line, header_line, wake_line
from fxworld.types import Entry

__all__ = ["Target", "shared_world", "SHARED", "write_file", "entry", "run", "contents"]

SHARED: dict[str, MemoryWorld] = {}
"""The world of each ``shared://NAME`` URL (registered as a scheme by the tests)."""


def shared_world(url: str) -> MemoryWorld:
    return SHARED[url.split("?")[0]]


@dataclass
class Target:
    """A world by URL, which each call of :meth:`use` opens and closes."""

    url: str
    opener: Callable[[], Any]

    def use(self, work: Callable[[Any], Any]) -> Any:
        async def go() -> Any:
            world = self.opener()
            try:
                return await work(world)
            finally:
                await world.close()

        return asyncio.run(go())


def make_target(kind: str, tmp_path: Path, max_entry_bytes: int, redis_url: str = "") -> Target:
    limit = f"max_entry_bytes={max_entry_bytes}"
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path}/target.db?{limit}"
        return Target(url, lambda: open_world(url))
    if kind == "memory":
        SHARED[f"shared://{tmp_path.name}"] = MemoryWorld(max_entry_bytes=max_entry_bytes)
        return Target(
            f"shared://{tmp_path.name}", lambda: shared_world(f"shared://{tmp_path.name}")
        )
    url = f"{redis_url}&{limit}"
    return Target(url, lambda: open_world(url))


def entry(sid: str, seq: int, kind: str, data: dict[str, Any], epoch: int | None = None) -> Entry:
    return Entry(sid, seq, kind, data, epoch, datetime.now(UTC))


def write_file(
    path: Path, entries: Iterable[Entry], wakes: dict[str, datetime] | None = None
) -> Path:
    """An export file holding ``entries`` (sessions together, in order), each
    session's wake after its entries."""
    lines, sessions, count = [header_line()], list[str](), 0
    for e in entries:
        if sessions and sessions[-1] != e.session_id and sessions[-1] in (wakes or {}):
            lines.append(wake_line(sessions[-1], (wakes or {})[sessions[-1]]))
        if not sessions or sessions[-1] != e.session_id:
            sessions.append(e.session_id)
        lines.append(entry_line(e, engine_key(e)))
        count += 1
    if sessions and sessions[-1] in (wakes or {}):
        lines.append(wake_line(sessions[-1], (wakes or {})[sessions[-1]]))
    lines.append(end_line(len(sessions), count))
    path.write_text("".join(lines), encoding="utf-8")
    return path


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def contents(world: Any, ids: Iterable[str]) -> dict[str, Any]:
    """What a test compares before and after: each session's log (positions, kinds,
    data, epochs) and the sessions the world lists."""
    out: dict[str, Any] = {}
    for sid in ids:
        log = await world.read(sid, 0, limit=100_000)
        out[sid] = [(e.seq, e.kind, e.data, e.epoch) for e in log]
    out["(listed)"] = await world.list_sessions(limit=1000)
    return out
