"""One SDK client per event loop, closed when its loop shuts down.

An HTTP client's pooled connections belong to the event loop that opened them: a
model built once (``Agent(model=...)`` at import time) but used from several
loops (``asyncio.run`` twice, tests, the CLI) needs a client per loop. Each
client is paired with a suspended async generator whose ``finally`` closes it;
``asyncio.run`` (and any runner calling ``loop.shutdown_asyncgens()``) finalizes
that generator before the loop closes, so no client outlives its loop with open
connections, and no finalizer later touches a closed loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["PerLoop"]

C = TypeVar("C")


class PerLoop(Generic[C]):
    """Clients made by ``make``, one per running loop, closed by ``close``."""

    def __init__(
        self,
        make: Callable[[], C],
        close: Callable[[C], Awaitable[None]],
        *,
        first: C | None = None,
    ) -> None:
        self._make = make
        self._close = close
        self._first = first  # made before any loop ran: the first loop's client
        self._held: dict[int, tuple[asyncio.AbstractEventLoop, C, AsyncGenerator[None, None]]] = {}

    async def get(self) -> C:
        loop = asyncio.get_running_loop()
        held = self._held.get(id(loop))
        if held is not None and held[0] is loop:
            return held[1]
        for key, (old, _, _) in list(self._held.items()):
            if old.is_closed():
                del self._held[key]
        client, self._first = (
            (self._first, None) if self._first is not None else (self._make(), None)
        )
        guard = self._guard(id(loop), client)
        await guard.__anext__()  # now suspended; finalized at the loop's shutdown
        self._held[id(loop)] = (loop, client, guard)
        return client

    async def _guard(self, key: int, client: C) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            held = self._held.get(key)
            if held is not None and held[1] is client:
                del self._held[key]
            await self._close(client)

    async def aclose(self) -> None:
        """Close the running loop's client, if any."""
        held = self._held.pop(id(asyncio.get_running_loop()), None)
        if held is not None:
            await held[2].aclose()
