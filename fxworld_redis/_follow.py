"""Followers of one world share one blocking ``XREAD`` per partition (W10).

A follower that blocked in an ``XREAD`` of its own held one pooled connection while
it waited: a hundred idle followers (the SSE streams of one ``fxworld serve``) took
every connection of redis-py's pool, and appends, reads and wakes failed with
``MaxConnectionsError``. Here a follower only says which stream it waits on and from
which seq; one task per group of streams blocks in one ``XREAD`` over every stream
waited on (each from the lowest cursor waiting on it) and wakes the followers of the
streams that grew, which then read as before. A group is the whole world on one
server (its ``XREAD`` takes keys of any slot) and one partition on a Cluster (an
``XREAD`` there takes keys of one slot, and a partition's keys share one), so
followers hold at most one connection per partition, however many they are.

A follower whose stream (or lower cursor) the ``XREAD`` in flight does not cover
has it sent again: cancelled, which makes redis-py close that connection, then sent
with the new set. A crowd of followers arriving together is gathered for
:data:`GATHER` seconds first, so it costs a few commands, not one each.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from fxworld_redis._scripts import seq_of, text

__all__ = ["Waits", "GATHER"]

GATHER = 0.005
"""Seconds a new follower waits for others before the ``XREAD`` is sent again."""

XRead = Callable[[list[str], list[str]], Awaitable[Any]]
"""``xread(streams, ids)``: one blocking ``XREAD COUNT 1 STREAMS ...``, its reply."""


class Waits:
    """The waiting followers of one world on one event loop, by group."""

    def __init__(self, xread: XRead) -> None:
        self._xread = xread
        self._groups: dict[int, _Group] = {}

    async def wait(self, group: int, stream: str, cursor: int) -> None:
        """Return once ``stream`` may hold an entry past seq ``cursor`` (it may
        return early); raise what the ``XREAD`` raised if it failed."""
        found = self._groups.get(group)
        if found is None:
            found = self._groups[group] = _Group(self._xread)
        await found.wait(stream, cursor)

    async def close(self, error: BaseException) -> None:
        """Stop every ``XREAD``; the followers waiting get ``error``."""
        groups, self._groups = list(self._groups.values()), {}
        for g in groups:
            await g.close(error)


class _Group:
    """The followers of one group and the one ``XREAD`` that serves them."""

    def __init__(self, xread: XRead) -> None:
        self._xread = xread
        self._waiting: dict[str, dict[asyncio.Future[None], int]] = {}  # stream -> cursors
        self._sent: dict[str, int] = {}  # what the XREAD in flight covers
        self._stale: asyncio.Future[None] | None = None  # done: one it does not cover came
        self._task: asyncio.Task[None] | None = None

    async def wait(self, stream: str, cursor: int) -> None:
        done = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(stream, {})[done] = cursor
        stale = self._stale
        if (stream not in self._sent or cursor < self._sent[stream]) and stale and not stale.done():
            stale.set_result(None)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._serve())
        try:
            await done
        finally:
            waiting = self._waiting.get(stream, {})
            waiting.pop(done, None)
            if not waiting:
                self._waiting.pop(stream, None)

    async def close(self, error: BaseException) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        self._fail(error)

    async def _serve(self) -> None:
        """One ``XREAD`` after another while anyone waits (an idle group holds no
        connection once its last ``XREAD`` ends)."""
        try:
            while self._waiting:
                reply = await self._read_once()
                if reply is not None:
                    self._wake(_first_seqs(reply))
        except Exception as e:  # the world's own error, after its retries: every follower's
            self._fail(e)
        finally:
            self._sent = {}

    async def _read_once(self) -> Any:
        """One ``XREAD`` over what is waited on now; None if it was sent again
        before it answered (a follower it did not cover arrived)."""
        self._sent = {s: min(w.values()) for s, w in self._waiting.items()}
        self._stale = stale = asyncio.get_running_loop().create_future()
        ids = [f"{c}-0" for c in self._sent.values()]
        read = asyncio.ensure_future(self._xread(list(self._sent), ids))
        try:
            await asyncio.wait({read, stale}, return_when=asyncio.FIRST_COMPLETED)
            if not read.done():  # gather the crowd arriving with it, then send again
                await asyncio.wait({read}, timeout=GATHER)
        finally:
            stale.cancel()
            if not read.done():
                read.cancel()
                await asyncio.wait({read})
        if read.cancelled():
            return None
        return read.result()

    def _wake(self, first: dict[str, int]) -> None:
        """Wake the followers behind the first new seq of each stream that grew.

        Each keeps that seq as its cursor until its task takes it out: it will be
        back past it, so the next ``XREAD`` (sent before that) already covers it
        and need not be sent again when it returns."""
        for stream, seq in first.items():
            waiting = self._waiting.get(stream, {})
            for done, cursor in waiting.items():
                if cursor < seq and not done.done():
                    done.set_result(None)
                    waiting[done] = seq

    def _fail(self, error: BaseException) -> None:
        for waiting in self._waiting.values():
            for done in waiting:
                if not done.done():
                    done.set_exception(error)


def _first_seqs(reply: Any) -> dict[str, int]:
    """Stream -> seq of its first new entry, from an ``XREAD COUNT 1`` reply (a list
    of ``[stream, [(id, fields)]]`` in RESP2, a map in RESP3; None when it timed out)."""
    items = reply.items() if isinstance(reply, dict) else (reply or [])
    out: dict[str, int] = {}
    for stream, entries in items:
        first = entries[0]
        if isinstance(first, list):  # RESP3 nests the entries one level deeper
            first = first[0]
        out[text(stream)] = seq_of(first[0])
    return out
