"""``WorldSession``: an OpenAI Agents SDK session on any World (extra
``fxworld[openai-agents]``).

The session ``session_id`` is the fxworld session ``oa.`` followed by 40 hex digits
of the SHA-256 of the id (any string; fxworld ids are limited, W15). Its log holds
one ``oa.item`` entry per item, in order, and one ``oa.popped`` entry per
``pop_item`` naming the seq of the item it removed (a log is append-only, W4).

- ``add_items``: one unfenced append of all the items (W3, W4): two runners that add
  at once both land, whole and in order; none is lost.
- ``pop_item``: the newest item still there, removed by an append with
  ``expect=`` the log's last seq (W5); on ``Conflict`` (another add or pop landed
  in between) it looks again. So it removes exactly the item it returns, and an
  item added while it looked is never removed by it.
- ``get_items(limit=n)``: reads backwards from the end until ``n`` items are found
  (one request for the end, then pages of 8, 16, ... entries): it reads the last
  ``n`` items and the pops among them, never the whole session.
- ``clear_session``: one ``delete`` (W14).

One session object, any event loop (:mod:`~fxworld.integrations.loops`): built at
module level, it serves one ``asyncio.run`` after another, and loops of several
threads at once (their calls are handed to the loop that owns the world's
connections). ``close()`` closes the world.
"""

from __future__ import annotations

import hashlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from agents.memory.session_settings import SessionSettings, resolve_session_limit

import fxworld
from fxworld.errors import Conflict
from fxworld.logends import backwards, last_seq
from fxworld.protocol import World
from fxworld.types import NewEntry

from .loops import LoopOwner

__all__ = ["WorldSession", "PREFIX", "session_of"]

PREFIX = "oa."
"""Every Agents SDK session's fxworld session id starts with this."""

_ITEM, _POPPED = "oa.item", "oa.popped"

T = TypeVar("T")


def session_of(session_id: str) -> str:
    """The fxworld session id of an Agents SDK session id."""
    return PREFIX + hashlib.sha256(session_id.encode()).hexdigest()[:40]


class WorldSession:
    """The Agents SDK's ``Session`` protocol on a World.

    ``world``: any World; ``None`` means :func:`fxworld.world` (``FXWORLD_URL``, else
    the embedded SQLite world). ``session_settings``: the SDK's settings; its
    ``limit`` is the default of ``get_items``. The world is set up on first use.
    """

    def __init__(
        self,
        session_id: str,
        world: World | None = None,
        *,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = session_settings
        self.world: World = world if world is not None else fxworld.world()
        self._sid = session_of(session_id)
        self._ready = False
        self._loops = LoopOwner("WorldSession")

    async def _world(self) -> World:
        if not self._ready:
            await self.world.setup()
            self._ready = True
        return self.world

    async def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop that owns the world (see the module)."""
        return await self._loops.run(coro)

    async def close(self) -> None:
        """Close the world (its connections), once, when the program is done with
        the session (a world shared with other objects is closed for them too)."""
        try:
            await self._on_loop(self.world.close())
        finally:
            self._loops.close()

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The items, oldest first; with ``limit``, the latest ``limit`` of them
        (``0``: none; a negative limit: all, as the SDK's SQLite session does)."""
        return await self._on_loop(self._get_items(limit))

    async def _get_items(self, limit: int | None) -> list[Any]:
        world = await self._world()
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is None or limit < 0:
            return await self._all(world)
        found: list[Any] = []
        popped: set[int] = set()
        if limit == 0:
            return found
        async for entry in backwards(world, self._sid):
            if entry.kind == _POPPED:
                popped.add(entry.data["seq"])
            elif entry.kind == _ITEM and entry.seq not in popped:
                found.append(entry.data["item"])
                if len(found) == limit:
                    break
        return found[::-1]

    async def _all(self, world: World) -> list[Any]:
        items: dict[int, Any] = {}
        after = 0
        while page := await world.read(self._sid, after):
            for entry in page:
                if entry.kind == _ITEM:
                    items[entry.seq] = entry.data["item"]
                elif entry.kind == _POPPED:
                    items.pop(entry.data["seq"], None)
            after = page[-1].seq
        return list(items.values())

    async def add_items(self, items: list[Any]) -> None:
        """Append the items, all or none, in order (W3, W4)."""
        await self._on_loop(self._add_items(items))

    async def _add_items(self, items: list[Any]) -> None:
        if items:
            world = await self._world()
            await world.append(self._sid, [NewEntry(_ITEM, {"item": item}) for item in items])

    async def pop_item(self) -> Any | None:
        """Remove and return the newest item, or ``None`` if there is none."""
        return await self._on_loop(self._pop_item())

    async def _pop_item(self) -> Any | None:
        world = await self._world()
        while True:
            last = await last_seq(world, self._sid)
            newest = await self._newest(world, last)
            if newest is None:
                return None
            seq, item = newest
            try:  # W5: only if nothing landed since the look
                await world.append(self._sid, [NewEntry(_POPPED, {"seq": seq})], expect=last)
            except Conflict:
                continue
            return item

    async def _newest(self, world: World, last: int) -> tuple[int, Any] | None:
        popped: set[int] = set()
        async for entry in backwards(world, self._sid, last):
            if entry.kind == _POPPED:
                popped.add(entry.data["seq"])
            elif entry.kind == _ITEM and entry.seq not in popped:
                return entry.seq, entry.data["item"]
        return None

    async def clear_session(self) -> None:
        """Remove every item (W14)."""
        await self._on_loop(self._clear())

    async def _clear(self) -> None:
        world = await self._world()
        await world.delete(self._sid)
