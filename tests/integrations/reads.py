"""World wrappers that count: the entries its reads return (the tests that a read
of "the latest" costs what it should, not the whole log), and its appends (the
tests that a superstep costs one)."""

from __future__ import annotations

from typing import Any

from fxworld import World
from fxworld.types import Entry, NewEntry


class CountingReads:
    """``inner`` with every ``read`` counted (entries returned, calls)."""

    def __init__(self, inner: World) -> None:
        self.inner = inner
        self.entries_read = 0
        self.reads = 0

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        got = await self.inner.read(session_id, after, limit=limit)
        self.entries_read += len(got)
        self.reads += 1
        return got

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class CountingAppends:
    """``inner`` with every ``append`` counted."""

    def __init__(self, inner: World) -> None:
        self.inner = inner
        self.appends = 0

    async def append(self, session_id: str, entries: list[NewEntry], **kw: Any) -> int:
        self.appends += 1
        return await self.inner.append(session_id, entries, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
