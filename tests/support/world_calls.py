"""A world that counts its calls: wraps any world and records each call of a World
protocol method (the optional protocols' too, present exactly when the inner world
has them), under the phase the test names (``counting.phase = "run"``), for the
tests and benchmarks that say how many world calls something costs."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fxworld import tool
from fxworld.protocol import World
from fxworld.types import Entry, Fence, NewEntry, WakeLease

__all__ = ["CountingWorld", "Recorder", "slow_step"]

_OPTIONAL = (
    "take_wakes",
    "list_sessions",
    "wake_state",
    "list_wakes",
    "last_entry",
    "delete_if_idle",
    "drop_namespace",
)


class CountingWorld:
    """``inner``, with every protocol call recorded as ``(phase, method)`` in
    :attr:`calls`, in order."""

    def __init__(self, inner: World) -> None:
        self.inner = inner
        self.phase = ""
        self.calls: list[tuple[str, str]] = []
        for name in _OPTIONAL:
            if hasattr(inner, name):
                setattr(self, name, self._counted(name, getattr(inner, name)))

    def __getattr__(self, name: str) -> Any:  # capabilities, namespace, max_entry_bytes
        return getattr(self.inner, name)

    def by_method(self, phase: str | None = None) -> Counter[str]:
        """The calls per method (of one phase, or of all)."""
        return Counter(m for p, m in self.calls if phase is None or p == phase)

    def _note(self, method: str) -> None:
        self.calls.append((self.phase, method))

    def _counted(self, name: str, method: Any) -> Any:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            self._note(name)
            return await method(*args, **kwargs)

        return counted

    async def setup(self) -> None:
        self._note("setup")
        await self.inner.setup()

    async def close(self) -> None:
        self._note("close")
        await self.inner.close()

    async def acquire(self, session_id: str) -> Fence:
        self._note("acquire")
        return await self.inner.acquire(session_id)

    async def append(
        self,
        session_id: str,
        entries: Sequence[NewEntry],
        *,
        fence: Fence | None = None,
        expect: int | None = None,
        key: str | None = None,
        wake: float | None = None,
    ) -> int:
        self._note("append")
        return await self.inner.append(
            session_id, entries, fence=fence, expect=expect, key=key, wake=wake
        )

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        self._note("read")
        return await self.inner.read(session_id, after, limit=limit)

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Entry]:
        self._note("follow")
        return self.inner.follow(session_id, after)

    async def wake(self, session_id: str, *, delay: float = 0.0) -> None:
        self._note("wake")
        await self.inner.wake(session_id, delay=delay)

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        self._note("take_wake")
        return await self.inner.take_wake(lease=lease)

    async def renew_wake(self, wake: WakeLease, *, lease: float) -> WakeLease:
        self._note("renew_wake")
        return await self.inner.renew_wake(wake, lease=lease)

    async def finish_wake(self, wake: WakeLease) -> None:
        self._note("finish_wake")
        await self.inner.finish_wake(wake)

    async def delete(self, session_id: str) -> None:
        self._note("delete")
        await self.inner.delete(session_id)


class Recorder:
    """A push that records what it was asked to send."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def push(self, session_id: str, *, delay: float = 0.0) -> None:
        self.sent.append(session_id)

    async def close(self) -> None:
        pass


@tool(idempotent=True)
async def slow_step(n: int) -> str:
    """Takes 0.6 s."""
    await asyncio.sleep(0.6)
    return f"step {n} done"
