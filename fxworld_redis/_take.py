"""Taking wakes: the ``take`` and ``peek`` scripts over a namespace's partitions,
for any agent or for one (W12, W19).

On one server a take is one script over every partition. On a Cluster each
partition is its own slot: the partitions that had ready wakes are tried first, one
script each, in turn; when none is known (or the hint is older than 50 ms) a
read-only ``peek`` asks every partition at once. The hint is kept per agent (and
one for "any agent"): a peek for one agent looks only at its queues and the shared
ones, so a partition full of other agents' due wakes is never taken for its own
(W19, no starvation).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fxworld.types import WakeLease
from fxworld_redis._scripts import Keys, text

__all__ = ["Takes"]

_PEEK_EVERY = 0.05  # s: how long a Cluster world trusts its hint of ready partitions
_US = 1_000_000

Script = Callable[[str, Sequence[str], Sequence[str | bytes]], Awaitable[Any]]


@dataclass
class _Hint:
    """What the last peek for one agent (``""``: any) found."""

    ready: list[int] = field(default_factory=list)  # partitions with a ready wake
    at: float = 0.0  # when (monotonic)
    turn: int = 0  # which partition wins a tie
    peeking: asyncio.Future[None] | None = None  # the peek out, on this loop


class Takes:
    """The takes of one world on one event loop (made again with the loop)."""

    def __init__(self, script: Script, cluster: bool) -> None:
        self._script = script
        self._cluster = cluster
        self._hints: dict[str, _Hint] = {}

    async def take(self, parts: list[Keys], micros: str, limit: int, agent: str) -> list[WakeLease]:
        """Up to ``limit`` due wakes, earliest ready first, of ``agent``'s sessions
        and of sessions no agent owns (``agent=""``: of any session)."""
        if not self._cluster:
            return await self._take(parts, micros, limit, agent)
        hint = self._hints.setdefault(agent, _Hint())
        peeked = False
        if not hint.ready or time.monotonic() - hint.at > _PEEK_EVERY:
            await self._peek(parts, hint, agent)
            peeked = True
        out = await self._take_ready(parts, hint, micros, limit, agent)
        if not out and not peeked:
            await self._peek(parts, hint, agent)
            out = await self._take_ready(parts, hint, micros, limit, agent)
        return out

    async def _peek(self, parts: list[Keys], hint: _Hint, agent: str) -> None:
        """Which partitions hold a ready wake for ``agent``, earliest first (ties:
        the next in turn). Callers that come while a peek is out wait for its
        answer (one peek, not one per worker: each asks every partition)."""
        if hint.peeking is not None:
            await asyncio.shield(hint.peeking)
            return
        hint.peeking = done = asyncio.get_running_loop().create_future()
        try:
            heads = await asyncio.gather(*(self._script("peek", [k.due], [agent]) for k in parts))
        finally:
            hint.peeking = None
            done.set_result(None)
        start, count = hint.turn, len(parts)
        hint.turn = (start + 1) % count
        ready = sorted(
            (float(text(head)), (p - start) % count, p)
            for p, head in enumerate(heads)
            if head != -1
        )
        hint.ready = [p for _, _, p in ready]
        hint.at = time.monotonic()

    async def _take_ready(
        self, parts: list[Keys], hint: _Hint, micros: str, limit: int, agent: str
    ) -> list[WakeLease]:
        out: list[WakeLease] = []
        while hint.ready and len(out) < limit:
            p = hint.ready.pop(0)
            got = await self._take([parts[p]], micros, limit - len(out), agent)
            if got:
                hint.ready.append(p)  # it may hold more: back of the line
            out += got
        return out

    async def _take(
        self, parts: list[Keys], micros: str, limit: int, agent: str
    ) -> list[WakeLease]:
        flat = await self._script(
            "take",
            [k.due for k in parts],
            [micros, str(limit), secrets.token_hex(16), agent],
        )
        return [
            WakeLease(
                text(flat[i]),
                text(flat[i + 1]),
                int(flat[i + 2]),
                datetime.fromtimestamp(int(text(flat[i + 3])) / _US, UTC),
                text(flat[i + 4]) or None,  # W19: the owner the take found
            )
            for i in range(0, len(flat), 5)
        ]
