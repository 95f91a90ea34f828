"""Bounded memory for what the world keeps per session.

The world caches what it knows of each session (its log's tail and keys, its wake
state) to save requests, and holds a lock per session while it writes. Neither may
grow with the number of sessions ever touched: reading 100,000 ids that do not
exist once kept 100,000 states (about 73 MB). :class:`Lru` keeps the most recently
used entries; :class:`KeyedLocks` keeps a lock only while someone holds or waits
for it. Dropping a cached entry is always safe: every decision is confirmed by the
server, so a forgotten session costs a request, never a wrong answer.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

__all__ = ["Lru", "KeyedLocks", "DEFAULT_CACHE_SIZE"]

DEFAULT_CACHE_SIZE = 10_000
"""Sessions whose state a world keeps in memory, by default (a few MB)."""

K = TypeVar("K")
V = TypeVar("V")


class Lru(Generic[K, V]):
    """A mapping that keeps the ``size`` most recently used keys."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._items: collections.OrderedDict[K, V] = collections.OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def __getitem__(self, key: K) -> V:
        value = self._items[key]
        self._items.move_to_end(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def pop(self, key: K) -> V | None:
        return self._items.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)


class KeyedLocks:
    """One :class:`asyncio.Lock` per key, kept only while it is held or awaited."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)
