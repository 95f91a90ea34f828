"""The wake queue on S3: one state object per session, changed with If-Match.

``w/{sid}`` holds ``{"due", "L", "again", "chk", "op"}``:

* ``due``: when the pending wake is due (W11: a new request keeps the earlier);
* ``L``: the lease ``[token, until, attempt]`` of the delivery in progress (W12);
* ``again``: the earliest request that arrived during the lease: ``finish_wake``
  makes it the next due time instead of removing the wake (W13);
* ``chk``: wake intents of appends in flight (W7), ``{token: [gen, after, delay,
  at]}``: written before the append's batch, removed by the writer after the
  append returned (applying the wake: in the background, or in its next write of
  the state) or when it was refused. Until then the intent is the wake: a
  ``take_wake`` that meets one whose wake would be due looks once at the position
  ``after + 1`` and applies the wake if the batch with that token is there. A
  writer that died in between leaves its intent; the next ``take_wake`` after
  :data:`RECOVER_AFTER` seconds looks for the batch with that token in the log
  after ``after`` and applies the wake (due at the batch's commit time plus the
  delay) or, once the intent is older than :data:`DROP_AFTER` and no such batch
  exists, drops it;
* ``op``: names the write that made this version, so that a retried write whose
  first attempt landed recognises itself.

There is no index and no hot key: ``take_wake`` LISTs ``w/`` (one request per
page of 1,000 sessions with wake state), GETs only the states whose ETag changed
since it last looked, and takes a due one with one conditional PUT, trying the
due sessions in random order so that several workers rarely race for one.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import random
import time
import uuid
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, TypeVar

from fxworld.errors import LeaseLost
from fxworld_s3._cache import DEFAULT_CACHE_SIZE, KeyedLocks, Lru
from fxworld_s3._layout import Keys
from fxworld_s3._store import Store, dumps, loads

__all__ = ["Wakes", "RECOVER_AFTER", "DROP_AFTER", "SETTLE_AFTER"]

RECOVER_AFTER = 1.0
"""Seconds an append's wake intent is left to its writer before take_wake recovers it."""
DROP_AFTER = 120.0
"""Seconds after which an intent whose batch never landed is dropped."""

SETTLE_AFTER = 0.05
"""Seconds a landed intent waits for this world's next write of the session's wake
state (the next append with a wake) before it is settled alone."""

R = TypeVar("R")
Doc = dict[str, Any]
Change = Callable[[Doc | None, float], tuple[Doc | None, R]]


def _empty(doc: Doc) -> bool:
    return doc.get("due") is None and not doc.get("L") and not doc.get("chk")


def _requested(doc: Doc | None, due: float, now: float) -> Doc:
    """``doc`` after a request for a wake due at ``due`` (W11, W13)."""
    doc = dict(doc or {})
    lease = doc.get("L")
    if lease and lease[1] >= now:
        again = doc.get("again")
        doc["again"] = due if again is None else min(again, due)
    else:
        old = doc.get("due")
        doc["due"] = due if old is None else min(old, due)
    return doc


class Wakes:
    """The wake queue of one namespace."""

    def __init__(
        self,
        store: Store,
        keys: Keys,
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        self.store = store
        self.spawn = spawn  # runs a coroutine in the background (the world drains them)
        self.keys = keys
        # sid -> (etag, state), of the most recently used sessions ("": none stored)
        self.states: Lru[str, tuple[str, Doc | None]] = Lru(cache_size)
        self.locks = KeyedLocks()
        self._looked: dict[str, float] = {}  # intent token -> when we last looked
        self._peeked: set[str] = set()  # intent tokens whose next position was looked at
        self._listing: asyncio.Future[list[tuple[str, str]]] | None = None  # LIST in flight
        self._next_list: asyncio.Future[list[tuple[str, str]]] | None = None  # the one after
        # sid -> {token: commit time (None: refused)}: this world's appends whose
        # intents are still to settle; the next write of the state settles them
        self.landed: dict[str, dict[str, float | None]] = {}

    async def change(self, sid: str, fn: Change[R]) -> R:
        """Apply ``fn(state, now)`` to ``w/{sid}`` with a conditional write, again
        on a lost race; ``fn`` returns the new state (``None``: remove it) and the
        result. The same write settles this world's landed intents of ``sid``."""
        async with self.locks.hold(sid):
            key = self.keys.wake(sid)
            known = self.states.get(sid)
            while True:
                fresh = known is None
                if known is None:
                    known = await self._get(sid)
                etag, doc = known
                settling = dict(self.landed.get(sid, {}))
                now = time.time()
                try:
                    new, result = fn(_settle_all(copy.deepcopy(doc), settling, now), now)
                except LeaseLost:
                    if fresh:
                        raise
                    known = None  # refuse only on what the server holds now
                    continue
                if new is not None and _empty(new):
                    new = None
                if new == doc:
                    if fresh:  # the server's state holds none of them: settled by others
                        self._forget(sid, settling)
                        return result
                    known = None  # nothing to write? only if the cache was right
                    continue
                op = uuid.uuid4().hex
                if new is None:
                    ok = await self.store.delete(key, etag=etag) if etag else True
                    if ok:
                        self.states[sid] = ("", None)
                        self._forget(sid, settling)
                        return result
                else:
                    new["op"] = op
                    body = dumps(new)
                    put = (
                        self.store.put_if(key, body, etag)
                        if etag
                        else self.store.put_new(key, body)
                    )
                    tag = await put
                    if tag is not None:
                        self.states[sid] = (tag, new)
                        self._forget(sid, settling)
                        return result
                known = await self._get(sid)
                if known[1] is not None and known[1].get("op") == op:
                    self._forget(sid, settling)
                    return result  # an attempt that seemed to fail had landed

    def _forget(self, sid: str, settled: dict[str, float | None]) -> None:
        """The intents ``settled`` are settled in the server's state: forget them."""
        landed = self.landed.get(sid)
        if landed is not None:
            for token in settled:
                landed.pop(token, None)
            if not landed:
                del self.landed[sid]

    async def _get(self, sid: str) -> tuple[str, Doc | None]:
        got = await self.store.get(self.keys.wake(sid))
        known: tuple[str, Doc | None] = (
            (got[1], loads(got[0])) if isinstance(got, tuple) else ("", None)
        )
        self.states[sid] = known
        return known

    # -- the operations -----------------------------------------------------------------

    async def request(self, sid: str, delay: float) -> None:
        def fn(doc: Doc | None, now: float) -> tuple[Doc | None, None]:
            return _requested(doc, now + delay, now), None

        await self.change(sid, fn)

    async def intend(self, sid: str, token: str, gen: int, after: int, delay: float) -> None:
        """Record an append's wake intent before its batch is written (W7)."""

        def fn(doc: Doc | None, now: float) -> tuple[Doc | None, None]:
            doc = dict(doc or {})
            doc["chk"] = {**doc.get("chk", {}), token: [gen, after, delay, now]}
            return doc, None

        await self.change(sid, fn)

    async def settle(self, sid: str, token: str, landed_at: float | None) -> None:
        """The append named ``token`` landed at ``landed_at`` (apply its wake) or
        was refused (``None``: drop the intent). Whoever removes the intent applies
        it, so the wake is applied once."""
        self.landed.setdefault(sid, {})[token] = landed_at
        await self.change(sid, _unchanged)

    def settle_later(self, sid: str, token: str, landed_at: float) -> None:
        """:meth:`settle` in the background, or by this world's next write of the
        session's state, whichever comes first: the append has returned, and its
        intent already makes the wake owed (W7, see :meth:`take`)."""
        self.landed.setdefault(sid, {})[token] = landed_at
        self.spawn(self._settle_now(sid, later=SETTLE_AFTER))

    async def _settle_now(self, sid: str, *, later: float = 0.0) -> None:
        await asyncio.sleep(later)  # the session's next wake write may settle it first
        if self.landed.get(sid):
            with contextlib.suppress(Exception):  # take_wake's recovery settles it
                await self.change(sid, _unchanged)

    async def take(
        self, lease: float, find: Callable[[str, int, int, str, bool], Any], limit: int = 1
    ) -> list[tuple[str, str, int, float]]:
        """Take up to ``limit`` due wakes, each ``(sid, token, attempt, until)`` (W12),
        from one LIST. ``find(sid, gen, after, token, quick)`` awaits the commit time
        of the batch written by ``token`` (``quick``: only if it is at ``after + 1``),
        or ``None`` (intent recovery, W7)."""
        listed = await self._list_states()
        prefix = len(self.keys.wakes())
        docs: dict[str, Doc | None] = {}
        for k, tag in listed:
            known = self.states.get(k[prefix:])
            if known is not None and known[0] == tag:
                docs[k[prefix:]] = known[1]
        stale = [k[prefix:] for k, _ in listed if k[prefix:] not in docs]
        # this call's own answers, not the cache: more states than it holds may be due
        for sid, got in zip(stale, await asyncio.gather(*map(self._get, stale)), strict=True):
            docs[sid] = got[1]
        now = time.time()
        due: list[str] = []
        for sid, doc in docs.items():
            if doc is None:
                continue
            if _deliverable(doc, now):
                due.append(sid)
            for token, (gen, after, delay, at) in list(doc.get("chk", {}).items()):
                # W7: an intent whose wake would be due is owed once its batch landed:
                # look at the position right after ``after`` once, at once (its writer
                # may still be settling it), then the whole log after RECOVER_AFTER
                quick = at + delay <= now and token not in self._peeked
                if quick or (
                    now - at >= RECOVER_AFTER and now - self._looked.get(token, 0) >= RECOVER_AFTER
                ):
                    if quick:
                        self._peeked.add(token)
                    else:
                        self._looked[token] = now
                    await self._recover(sid, token, (gen, after, at), find, quick=quick)
                    if _deliverable((self.states.get(sid) or ("", None))[1] or {}, time.time()):
                        due.append(sid)
        random.shuffle(due)
        left = list(dict.fromkeys(due))  # W12: each session once in a batch
        out: list[tuple[str, str, int, float]] = []
        while left and len(out) < limit:
            # as many conditional PUTs at once as the batch still lacks; one that
            # lost a race to another taker is replaced from the rest
            tries, left = left[: limit - len(out)], left[limit - len(out) :]
            out += [t for t in await asyncio.gather(*map(partial(self._take, lease), tries)) if t]
        return out

    async def _list_states(self) -> list[tuple[str, str]]:
        """LIST ``w/``, shared by the takers of this world that call while one LIST
        runs: they wait for the next one, which starts after their calls (so it sees
        every wake requested before them), and take its answer (group commit)."""
        while True:
            shared = self._next_list
            if shared is None:
                return await self._lead_list()
            try:
                return await asyncio.shield(shared)
            except asyncio.CancelledError:
                if not shared.cancelled():
                    raise  # this taker was cancelled
                # its leader was cancelled: lead the next one

    async def _lead_list(self) -> list[tuple[str, str]]:
        nxt: asyncio.Future[list[tuple[str, str]]] = asyncio.get_running_loop().create_future()
        self._next_list = nxt
        try:
            while self._listing is not None:  # the LIST in flight started before us
                await asyncio.wait([self._listing])
            self._next_list = None
            self._listing = nxt
            nxt.set_result(await self.store.list(self.keys.wakes()))
        except BaseException as e:
            if self._next_list is nxt:
                self._next_list = None
            if not nxt.done():
                if isinstance(e, Exception):
                    nxt.set_exception(e)
                    nxt.exception()  # retrieved: the leader raises it itself
                else:
                    nxt.cancel()
            raise
        finally:
            if self._listing is nxt:
                self._listing = None
        return nxt.result()

    async def _take(self, lease: float, sid: str) -> tuple[str, str, int, float] | None:
        token = uuid.uuid4().hex
        taken = await self.change(sid, _taker(token, lease))
        return None if taken is None else (sid, token, taken[0], taken[1])

    async def _recover(
        self, sid: str, token: str, intent: tuple[int, int, float], find: Any, *, quick: bool
    ) -> None:
        gen, after, at = intent
        landed = await find(sid, gen, after, token, quick)
        if landed is not None:
            await self.settle(sid, token, landed)
        elif not quick and time.time() - at >= DROP_AFTER:
            await self.settle(sid, token, None)
        else:
            return
        self._looked.pop(token, None)
        self._peeked.discard(token)

    async def renew(self, sid: str, token: str, lease: float) -> float:
        def fn(doc: Doc | None, now: float) -> tuple[Doc | None, float]:
            _holding(doc, token, now)
            assert doc is not None
            doc["L"] = [token, now + lease, doc["L"][2]]
            return doc, now + lease

        return await self.change(sid, fn)

    async def finish(self, sid: str, token: str) -> None:
        def fn(doc: Doc | None, now: float) -> tuple[Doc | None, None]:
            _holding(doc, token, now)
            assert doc is not None
            again = doc.pop("again", None)
            doc["L"] = None
            doc["due"] = again  # W13: a request during the lease stays due
            return doc, None

        await self.change(sid, fn)

    async def view(
        self, sid: str, find: Callable[[str, int, int, str, bool], Any]
    ) -> tuple[float, float | None, int] | None:
        """The session's pending wake as ``(due, leased until, attempt)``, read from
        the server and changing nothing (``WakeLister``). An intent counts once its
        batch is found right after the tail it saw (as :meth:`take` finds it)."""
        if self.landed.get(sid):
            await self._settle_now(sid)  # this world's own appends: settle them first
        _, doc = await self._get(sid)
        if doc is None:
            return None
        now = time.time()
        due = doc.get("due")
        for token, (gen, after, delay, _) in doc.get("chk", {}).items():
            at = await find(sid, gen, after, token, True)
            if at is not None:
                due = at + delay if due is None else min(due, at + delay)
        lease = doc.get("L")
        if lease:
            until = lease[1] if lease[1] >= now else None
            return (lease[1] if due is None else due), until, int(lease[2])
        return None if due is None else (due, None, 0)

    async def pending(self, sid: str) -> bool:
        """Whether the server holds a wake state for ``sid`` (one GET, never the
        cache): a due wake, a lease (held or expired: delivered again, W12), a
        request made during a lease (W13) or an append's wake intent (W7). A state
        with none of them is removed by :meth:`change`, so any state is pending."""
        _, doc = await self._get(sid)
        return doc is not None and not _empty(doc)

    async def forget(self, sid: str) -> None:
        """Remove the session's wake (``delete``, W14)."""
        async with self.locks.hold(sid):
            await self.store.delete(self.keys.wake(sid))
            self.states[sid] = ("", None)
            self.landed.pop(sid, None)  # its intents went with it


def _unchanged(doc: Doc | None, now: float) -> tuple[Doc | None, None]:
    return doc, None


def _settle_all(doc: Doc | None, landed: dict[str, float | None], now: float) -> Doc | None:
    for token, at in landed.items():
        doc = _settled(doc, token, at, now)
    return doc


def _settled(doc: Doc | None, token: str, landed_at: float | None, now: float) -> Doc | None:
    """``doc`` with the intent ``token`` applied (its batch landed at ``landed_at``)
    or dropped (``None``); unchanged if the intent is gone (someone settled it)."""
    if doc is None or token not in doc.get("chk", {}):
        return doc
    doc = dict(doc)
    chk = dict(doc["chk"])
    _, _, delay, _ = chk.pop(token)
    doc["chk"] = chk
    if landed_at is not None:
        doc = _requested(doc, landed_at + delay, now)
    return doc


def _deliverable(doc: Doc, now: float) -> bool:
    lease = doc.get("L")
    if lease:
        return bool(lease[1] < now)  # an expired lease is delivered again (W12)
    due = doc.get("due")
    return due is not None and due <= now  # never before its due time (W11)


def _taker(token: str, lease: float) -> Change[tuple[int, float] | None]:
    def fn(doc: Doc | None, now: float) -> tuple[Doc | None, tuple[int, float] | None]:
        if doc is None or not _deliverable(doc, now):
            return doc, None
        old = doc.get("L")
        attempt = old[2] + 1 if old else 1
        if old and doc.get("again") is not None and doc["again"] <= now:
            doc.pop("again")  # the redelivery covers a request made during the lease
        doc["L"] = [token, now + lease, attempt]
        return doc, (attempt, now + lease)

    return fn


def _holding(doc: Doc | None, token: str, now: float) -> None:
    lease = (doc or {}).get("L")
    if not lease or lease[0] != token or lease[1] < now:
        raise LeaseLost("the lease expired or was taken by another worker")
