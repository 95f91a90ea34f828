"""Appends of one LangGraph thread that meet, sent as one append (one round trip,
one commit).

In a superstep LangGraph saves the tasks' writes (``put_writes``, in the
background) and then the next checkpoint (``put``, awaited with ``durability=
"sync"``). Two appends to one session are serialised by the world (W4), so sent
apart they cost two commits one after the other on the superstep's path. Here a
write of a checkpoint already in the log waits a few turns of the event loop
(:data:`LINGER`, no timer) for other appends to its thread; a checkpoint, or any
append that cannot wait, joins what is waiting and sends it at once. What waits
is sent within those turns whatever comes, so a task's writes are durable as
soon as they were before, give or take those turns (the crash-and-resume
guarantee holds: a write is saved once its ``put_writes`` returns).

Only appends of one run (or edits, outside any run) are joined: each carries its
run's fence (:mod:`~fxworld.integrations.langgraph_fences`). A joined append is
all or nothing (W4) with that fence (W2): each
caller gets its own entry's seq, or the same refusal. Its idempotency key (W6)
is the hash of its parts' keys: a retry of the same calls lands once; a call
repeated alone later may land again, which the reads absorb (a regular write is
kept once per task and index, the first; a special one is the last and the same).
An edit refused because a run took the thread over since is sent again once with
the thread taken over anew: an edit outside a run never fails for good.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from fxworld.errors import Fenced
from fxworld.protocol import World
from fxworld.types import Fence, NewEntry

__all__ = ["LINGER", "ThreadAppends"]

LINGER = 2
"""Turns of the event loop a write waits for its thread's next checkpoint."""


@dataclass
class _Batch:
    thread_id: str
    run: object | None
    entries: list[NewEntry] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    now: bool = False
    landed: asyncio.Future[int] | None = None


class ThreadAppends:
    """The appends of a saver, joined per thread (see the module).

    ``fence(sid, run, again)`` gives the fence to write ``sid`` with for ``run``
    (``None``: an edit; ``again``: after a refusal); ``refused(thread_id, fenced)``
    the error a refused append raises.
    """

    def __init__(
        self,
        world: World,
        fence: Callable[[str, object | None, bool], Awaitable[Fence]],
        refused: Callable[[str, Fenced], Exception],
    ) -> None:
        self._world = world
        self._fence = fence
        self._refused = refused
        self._waiting: dict[tuple[str, int], _Batch] = {}
        self._flushing: set[asyncio.Task[None]] = set()

    async def append(
        self,
        sid: str,
        thread_id: str,
        entries: Sequence[NewEntry],
        key: str,
        *,
        run: object | None,
        linger: bool,
    ) -> int:
        """Append ``entries`` (kept together, in order) to ``sid`` for ``run``,
        alone or with others of the run (see the module); the seq of the last."""
        at = (sid, id(run))
        batch = self._waiting.get(at)
        if batch is None or batch.run is not run:
            if not linger:
                return await self._send(sid, _Batch(thread_id, run, list(entries), [key]))
            batch = self._waiting[at] = _Batch(thread_id, run)
            batch.landed = asyncio.get_running_loop().create_future()
            flush = asyncio.get_running_loop().create_task(self._flush(at, batch))
            self._flushing.add(flush)  # held until done
            flush.add_done_callback(self._flushing.discard)
        batch.entries.extend(entries)
        batch.keys.append(key)
        batch.now = batch.now or not linger
        after = len(batch.entries)
        assert batch.landed is not None
        last = await asyncio.shield(batch.landed)
        return last - (len(batch.entries) - after)

    async def _flush(self, at: tuple[str, int], batch: _Batch) -> None:
        assert batch.landed is not None
        try:
            for _ in range(LINGER):
                if batch.now:
                    break
                await asyncio.sleep(0)
        finally:
            del self._waiting[at]
        try:
            batch.landed.set_result(await self._send(at[0], batch))
        except asyncio.CancelledError:
            batch.landed.cancel()
            raise
        except Exception as e:  # every caller gets it
            batch.landed.set_exception(e)
            batch.landed.exception()  # retrieved: a caller may have been cancelled

    async def _send(self, sid: str, batch: _Batch) -> int:
        key = batch.keys[0]
        if len(batch.keys) > 1:
            key = "b:" + hashlib.sha256("\x00".join(batch.keys).encode()).hexdigest()
        fence = await self._fence(sid, batch.run, False)
        try:
            return await self._world.append(sid, batch.entries, fence=fence, key=key)  # W2, W6
        except Fenced as refused:
            if batch.run is not None:
                raise self._refused(batch.thread_id, refused) from None
        fence = await self._fence(sid, None, True)  # an edit: take the thread over again
        try:
            return await self._world.append(sid, batch.entries, fence=fence, key=key)
        except Fenced as refused:
            raise self._refused(batch.thread_id, refused) from None
