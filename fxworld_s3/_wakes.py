"""The wake queue on S3: one state object per session, changed with If-Match, and
a due index that lets ``take_wake`` list only what is due.

``w/{sid}`` holds ``{"due", "L", "again", "chk", "ix", "op"}``, the authority on the
session's wake (W11-W13):

* ``due``: when the pending wake is due (W11: a new request keeps the earlier);
* ``L``: the lease ``[token, until, attempt]`` of the delivery in progress (W12);
* ``again``: the earliest request that arrived during the lease: ``finish_wake``
  makes it the next due time instead of removing the wake (W13); a redelivery of
  an expired lease covers it, due or not (it was made before that take);
* ``chk``: wake intents of appends in flight (W7), ``{token: [gen, after, delay,
  at, t, nonce]}``: written before the append's batch, removed by the writer after
  the append returned (applying the wake: in the background, or in its next write
  of the state) or when it was refused. Until then the intent is the wake: a
  ``take_wake`` that meets one whose wake would be due looks once for the batch
  with that token from the position ``after + 1`` on (one GET when that position
  is free or holds it) and applies the wake if the batch is there. A take about to
  lease the state looks for every intent's batch so, due or not, every time: the
  take covers a request whose batch landed before it (W11, W13), which applied
  only after the take would be a request made during the lease, delivered again
  with attempt 1 once the lease is finished. A writer that died in between leaves
  its intent; a ``take_wake`` after
  :data:`RECOVER_AFTER` seconds looks for the batch with that token in the log
  after ``after`` and applies the wake (due at the batch's commit time plus the
  delay) or, once the intent is older than :data:`DROP_AFTER` and no such batch
  exists, drops it. Each intent has its own index key at ``t`` (``at + delay``),
  written beside the intent and before the batch;
* ``ix``: the index keys ``[[t, nonce]]`` that cover the state (usually one);
* ``op``: names the write that made this version, so that a retried write whose
  first attempt landed recognises itself (and two versions never share an ETag,
  the body's MD5).

**The due index** (``wd/{p}/{t}/{sid}/{nonce}``, spread over
:data:`~fxworld_s3._layout.DUE_PREFIXES` prefixes by the session id; keys sort by
``t``). The state may be deliverable from ``D`` on (the lease's end while leased,
else ``due``); the rules that keep every wake found:

1. Every key named in ``ix`` exists, with ``t <= D``. A key is written before the
   state that names it (:meth:`Wakes.change` writes it, then the conditional PUT),
   and removed only after a state without it landed. A writer that read an older
   state fails its If-Match and reads again, so it never relies on a removed key.
2. A change that makes ``D`` earlier than it was gets a fresh key (a new name): a
   taker that judged a key "not deliverable before X" may skip that key until X.
3. A renewal that finds its cover already due moves it to the lease's end, so a
   long turn does not sit at the front of the index.
4. A key that no state names (its writer died between the key and the state, or a
   removal failed) is left alone for :data:`ORPHAN_AFTER` seconds, then removed
   after a conditional write of the state, which makes any writer that still
   relies on it fail its If-Match and write a fresh key.

``take_wake`` first tries the keys the last listing left untried; when those give
nothing it LISTs the first :data:`PAGE` keys of each prefix (one listing shared by
the takers of this world at that moment). It GETs the states of the due sessions,
in random order within what it listed so that several workers rarely race for one,
and takes a due one with one conditional PUT.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fxworld.errors import LeaseLost
from fxworld_s3 import _wakedoc as wd
from fxworld_s3._cache import DEFAULT_CACHE_SIZE, KeyedLocks, Lru
from fxworld_s3._layout import Keys
from fxworld_s3._store import Store, dumps, loads
from fxworld_s3._wakedoc import Change, Cover, Doc, Look, R

__all__ = ["Wakes", "RECOVER_AFTER", "DROP_AFTER", "SETTLE_AFTER", "ORPHAN_AFTER", "PAGE", "GATHER"]

RECOVER_AFTER = 1.0
"""Seconds an append's wake intent is left to its writer before take_wake recovers it."""
DROP_AFTER = 120.0
"""Seconds after which an intent whose batch never landed is dropped."""

_INDEX_BODY = b"1"
"""A due index key's body, never read. Not empty: after a PUT with an empty body (sent
with botocore's ``Expect: 100-continue``) the connection was not reused, so each
index key opened a new one (SeaweedFS with aiohttp: 449 connections for 400 wakes)."""

SETTLE_AFTER = 0.05
"""Seconds a landed intent waits for this world's next write of the session's wake
state (the next append with a wake) before it is settled alone."""

ORPHAN_AFTER = 30.0
"""Seconds an index key that no state names is left to the writer that made it."""
PAGE = 10
"""Index keys a take LISTs per prefix (more only if these are all passed over)."""
GATHER = 0.05
"""Seconds the index keys dropped by this world gather before one request removes them."""
AGENTS_EVERY = 1.0
"""Seconds a take for any agent trusts its listing of the agents registry (``a/``)."""
_MORE = 50  # keys per further page
_LOOK = 32  # states a take reads at once, at most


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
        self._listing: asyncio.Future[list[list[str]]] | None = None  # LIST in flight
        self._next_list: asyncio.Future[list[list[str]]] | None = None  # the one after
        self._bare = False  # the last listing found no index key at all (an idle queue)
        # index key -> the time before which it needs no look (judged on a fresh state)
        self._skip: Lru[str, float] = Lru(cache_size)
        self._orphans: Lru[str, float] = Lru(cache_size)  # key no state names -> first seen
        self._trying: set[str] = set()  # sessions a take of this world is looking at
        self.scopes: set[str | None] = set()  # the agents this world took for (None: any)
        self._agents: set[str] = set()  # the a/ registry, as last listed
        self._agents_at = -AGENTS_EVERY  # when (monotonic)
        self._pool: dict[str, None] = {}  # keys of the last listing not looked at yet
        self._doomed: dict[str, None] = {}  # index keys to remove (rule 1), in order
        self._removing = False  # a task removes them
        # sid -> {token: commit time (None: refused)}: this world's appends whose
        # intents are still to settle; the next write of the state settles them
        self.landed: dict[str, dict[str, float | None]] = {}

    async def change(
        self, sid: str, fn: Change[R], *, move: bool = False, agent: str | None = None
    ) -> R:
        """Apply ``fn(state, now)`` to ``w/{sid}`` with a conditional write, again
        on a lost race; ``fn`` returns the new state (``None``: remove it) and the
        result. The same write settles this world's landed intents of ``sid``, and
        keeps the due index (the module docstring's rules). ``agent``: the
        session's owner, written into the new state (W19: its index keys then go
        under the owner's prefix)."""
        async with self.locks.hold(sid):
            return await self._change(sid, fn, move, agent)

    async def _settle_landed(self, sid: str) -> None:
        """Settle this world's landed intents of ``sid`` unless a write of the state
        settled them while this waited for the session's lock (then no request)."""
        async with self.locks.hold(sid):
            if self.landed.get(sid):
                await self._change(sid, wd.unchanged, False, None)

    async def _change(self, sid: str, fn: Change[R], move: bool, agent: str | None) -> R:
        """:meth:`change`, with the session's lock held."""
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
                new, result = fn(wd.settle_all(copy.deepcopy(doc), settling, now), now)
            except LeaseLost:
                if fresh:
                    raise
                known = None  # refuse only on what the server holds now
                continue
            if new is not None and wd.empty(new):
                new = None
            if new is not None and agent is not None:
                new["a"] = agent  # W19
            if new == doc:
                if fresh:  # the server's state holds none of them: settled by others
                    self._forget(sid, settling)
                    return result
                known = None  # nothing to write? only if the cache was right
                continue
            applied = {t for t, at in settling.items() if at is not None}
            plan = wd.cover(doc, new, applied, now, move=move)
            if plan.create is not None:  # rule 1: the key before the state naming it
                await self._put_key(sid, *plan.create)
            if await self._write(sid, key, etag, new):
                self._forget(sid, settling)
                self._drop(sid, plan.drop)
                return result
            # plan.create stays: a state that landed and was changed since may
            # name it; if none does, it is an orphan (rule 4). A refused write has
            # just read the state again (its check): decide on that.
            known = self.states.get(sid)

    async def _write(self, sid: str, key: str, etag: str, new: Doc | None) -> bool:
        """Write ``new`` over the version ``etag`` (``""``: none); whether it landed
        (a retried attempt that seemed to fail but landed counts, by its ``op``; a
        refused removal, if the state is gone)."""
        if new is None:
            if not etag or await self.store.delete(key, etag=etag):
                self.states[sid] = ("", None)
                return True
            # W12, W13: refused, yet maybe ours: the HTTP client sends a DELETE again
            # on a connection cut after it was sent, and the copy is refused (412)
            # when the first removed the state. Gone, it holds what this wanted.
            known = await self._get(sid)
            return known[1] is None
        op = new["op"] = uuid.uuid4().hex
        body = dumps(new)
        tag = await (self.store.put_if(key, body, etag) if etag else self.store.put_new(key, body))
        if tag is not None:
            self.states[sid] = (tag, new)
            return True
        known = await self._get(sid)
        return known[1] is not None and known[1].get("op") == op

    def _drop(self, sid: str, covers: list[Cover]) -> None:
        """Remove index keys in the background (rule 1: after the state without them).
        No state names them again (a cover is always a fresh key): takes of this
        world pass them over from now on. Keys dropped within :data:`GATHER` seconds
        go in one request (a finished wake's cover would cost a DELETE of its own)."""
        for t, nonce in covers:
            key = self.keys.due(sid, t, nonce)
            self._skip[key] = float("inf")
            self._doomed[key] = None
        if covers and not self._removing:
            self._removing = True
            self.spawn(self._remove_doomed())

    async def _remove_doomed(self) -> None:
        try:
            while self._doomed:
                await asyncio.sleep(GATHER)
                keys = list(self._doomed)[:1000]
                for key in keys:
                    del self._doomed[key]
                with contextlib.suppress(Exception):  # left behind: orphans, removed later
                    await self.store.delete_many(keys)
        finally:
            self._removing = False

    async def _put_key(self, sid: str, t: int, nonce: str) -> None:
        """Write the due index key ``(t, nonce)`` of ``sid`` (rule 1: before the state
        that names it)."""
        await self.store.put(self.keys.due(sid, t, nonce), _INDEX_BODY)

    async def _remove(self, key: str) -> None:
        with contextlib.suppress(Exception):  # left behind: an orphan, removed later
            await self.store.delete(key)

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

    async def request(self, sid: str, delay: float, agent: str | None = None) -> None:
        def fn(doc: Doc | None, now: float) -> tuple[Doc | None, None]:
            return wd.requested(doc, now + delay, now), None

        await self.change(sid, fn, agent=agent)

    async def intend(
        self, sid: str, token: str, gen: int, after: int, delay: float, agent: str | None = None
    ) -> None:
        """Record an append's wake intent before its batch is written (W7), and its
        own index key beside it (both before the batch: the wake is owed once it
        lands), unless the state is due by the intent's time anyway."""
        at = time.time()
        known = self.states.get(sid)
        covered = wd.deliverable_at(known[1] if known else None)
        if covered is not None and covered <= at + delay:
            # already due by then: the state's cover serves (checked again on the
            # state the write lands on, which writes a key first if it must)
            mine: list[Any] = []
        else:
            mine = [wd.ms(at + delay), Keys.nonce(agent)]  # W19: under the owner's prefix

        def fn(doc: Doc | None, now: float) -> tuple[Doc | None, None]:
            doc = dict(doc or {})
            doc["chk"] = {**doc.get("chk", {}), token: [gen, after, delay, at, *mine]}
            return doc, None

        if not mine:
            await self.change(sid, fn, agent=agent)
            return
        results = await asyncio.gather(
            self._put_key(sid, *mine),
            self.change(sid, fn, agent=agent),
            return_exceptions=True,
        )
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:  # no batch follows: drop the intent if it landed, and its key
            with contextlib.suppress(Exception):
                await self.settle(sid, token, None)
            self._drop(sid, [(mine[0], mine[1])])
            raise failed[0]

    async def settle(self, sid: str, token: str, landed_at: float | None) -> None:
        """The append named ``token`` landed at ``landed_at`` (apply its wake) or
        was refused (``None``: drop the intent). Whoever removes the intent applies
        it, so the wake is applied once."""
        self.landed.setdefault(sid, {})[token] = landed_at
        await self._settle_landed(sid)

    def settle_later(self, sid: str, token: str, landed_at: float) -> None:
        """:meth:`settle` in the background, or by this world's next write of the
        session's state, whichever comes first: the append has returned, and its
        intent already makes the wake owed (W7, see :meth:`take`)."""
        self.landed.setdefault(sid, {})[token] = landed_at
        self.spawn(self._settle_now(sid, later=SETTLE_AFTER))

    async def _settle_now(self, sid: str, *, later: float = 0.0) -> None:
        await asyncio.sleep(later)  # the session's next wake write may settle it first
        with contextlib.suppress(Exception):  # take_wake's recovery settles it
            await self._settle_landed(sid)

    async def take(
        self,
        lease: float,
        find: Callable[[str, int, int, str, bool], Any],
        limit: int = 1,
        agent: str | None = None,
        owner: Callable[[str], Awaitable[str | None]] | None = None,
    ) -> list[tuple[str, str, int, float]]:
        """Take up to ``limit`` due wakes, each ``(sid, token, attempt, until)`` (W12),
        from the due index. ``find(sid, gen, after, token, quick)`` awaits the
        commit time of the batch written by ``token`` (``quick``: only if it is at
        ``after + 1``), or ``None`` (intent recovery, W7).

        ``agent``: only wakes of sessions it owns or nobody owns (W19): the
        listing covers the shared prefixes and the agent's own, never another
        agent's; a state with no owner written in it is checked with ``owner(sid)``
        (the session's owner record) before it is taken. ``None``: any wake."""
        out: list[tuple[str, str, int, float]] = []
        self.scopes.add(agent)  # this world's listings cover this agent from now on
        look = Look(find, agent, owner)
        for fresh in (False, True):
            # first what the last listing left untried, then (if that gave nothing)
            # a listing that starts after this call: None only if it finds none due
            if fresh:
                await self._refill(limit, agent)
            candidates = self._candidates(list(self._pool), agent)
            left = list(candidates)
            random.shuffle(left)  # several workers rarely race for one
            out = await self._take_from(lease, left, candidates, look, limit)
            if out:
                break
        return out

    async def _refill(self, limit: int, agent: str | None) -> None:
        """List the due index into the pool of keys to try: the first PAGE keys of
        each prefix, and further pages of a prefix whose keys are all passed over
        (judged, or being tried), up to the first key not yet due (what is passed
        over is what runs now)."""
        pages = await self._list_due()
        candidates = self._candidates([k for page in pages for k in page], agent)
        self._pool = dict.fromkeys(k for page in pages for k in page)
        for page in pages:
            size = PAGE
            # W19: a page of another agent's keys is not listed further for this one
            while (
                len(candidates) < limit
                and len(page) == size
                and not self._future(page[-1])
                and self._ours(page[-1], agent)
            ):
                prefix = page[-1].rsplit("/", 3)[0] + "/"  # key = prefix + t/sid/nonce
                listed = await self.store.list(prefix, start_after=page[-1], limit=_MORE)
                page, size = [k for k, _ in listed], _MORE
                self._pool.update(dict.fromkeys(page))
                for sid, keys in self._candidates(page, agent).items():
                    candidates.setdefault(sid, []).extend(keys)

    async def _take_from(
        self, lease: float, left: list[str], listed: dict[str, list[str]], look: Look, limit: int
    ) -> list[tuple[str, str, int, float]]:
        """Look at the states of as many candidates as the batch lacks (a GET each;
        twice as many each round after), then take the due ones, as many at once as
        the batch lacks; one that lost a race or was not due after all is replaced
        from the rest."""
        out: list[tuple[str, str, int, float]] = []
        grow = 1  # doubled after each round: keys passed over are soon passed
        while left and len(out) < limit:
            left = [sid for sid in left if sid not in self._trying]  # another take's
            size, grow = min(_LOOK, (limit - len(out)) * grow), grow * 2
            chunk, left = left[:size], left[size:]
            self._trying.update(chunk)
            try:
                out += await self._take_chunk(lease, chunk, listed, look, limit - len(out))
            finally:
                self._trying.difference_update(chunk)
        return out

    async def _take_chunk(
        self, lease: float, chunk: list[str], listed: dict[str, list[str]], look: Look, limit: int
    ) -> list[tuple[str, str, int, float]]:
        """Look at ``chunk``'s states, take up to ``limit`` of the due ones, judge the rest."""
        out: list[tuple[str, str, int, float]] = []
        looked = await asyncio.gather(*(self._look(sid, look) for sid in chunk))
        due = [sid for sid, ok in zip(chunk, looked, strict=True) if ok]
        while due and len(out) < limit:
            tries, due = due[: limit - len(out)], due[limit - len(out) :]
            taken = await asyncio.gather(*(self._take(lease, sid, look.agent) for sid in tries))
            out += [t for t in taken if t]
        ours = {t[0]: t[3] for t in out}
        for sid in chunk:
            for key in listed[sid]:
                self._pool.pop(key, None)  # looked at: the next listing has it again
            if sid in ours:  # leased to us: no look before the lease ends (rule 2)
                for key in listed[sid]:
                    self._skip[key] = ours[sid]
            else:
                self._judge(sid, listed[sid])
        return out

    def _future(self, key: str) -> bool:
        return self.keys.parse_due(key)[0] > wd.ms(time.time())

    def _ours(self, key: str, agent: str | None) -> bool:
        """W19: a key of the shared prefixes, or of ``agent``'s (any, for ``None``)."""
        owner = Keys.agent_of(self.keys.parse_due(key)[2])
        return agent is None or owner is None or owner == agent

    def _candidates(self, listed: list[str], agent: str | None) -> dict[str, list[str]]:
        """Listed keys that are due and not judged already, by session; for an agent
        only its own keys and the shared ones (W19)."""
        now = time.time()
        out: dict[str, list[str]] = {}
        for key in listed:
            t, sid, _ = self.keys.parse_due(key)
            if not self._ours(key, agent):
                continue
            if t <= wd.ms(now) and (self._skip.get(key) or 0.0) <= now and sid not in self._trying:
                out.setdefault(sid, []).append(key)
        return out

    async def _look(self, sid: str, look: Look) -> bool:
        """Read ``sid``'s state (one GET) and recover its intents: is it due, and
        (for an agent) its own or nobody's (W19)?"""
        _, doc = await self._get(sid)
        if doc is not None and doc.get("chk"):
            await self._recover_all(sid, doc, look.find)
        _, doc = self.states.get(sid) or ("", None)
        if doc is None or not wd.deliverable(doc, time.time()):
            return False
        if look.agent is None or doc.get("a") == look.agent:
            return True
        if doc.get("a") is not None:
            return False  # another agent's (its key was in a shared prefix)
        owner = None if look.owner is None else await look.owner(sid)
        if owner is not None and owner != look.agent:
            # W19: owned, yet its state does not say so (written before the claim
            # landed): write the owner in, which moves its key to the owner's prefix
            self.spawn(self._tag(sid, owner))
            return False
        return True

    async def _tag(self, sid: str, agent: str) -> None:
        with contextlib.suppress(Exception):  # the next look tries again
            await self.change(sid, wd.unchanged, agent=agent)

    async def _recover_all(self, sid: str, doc: Doc, find: Any) -> None:
        now = time.time()
        looked: set[str] = set()
        for token, (gen, after, delay, at, *_) in list(doc.get("chk", {}).items()):
            # W7: an intent whose wake would be due is owed once its batch landed:
            # look for it from the position right after ``after`` once, at once (its
            # writer may still be settling it), then after RECOVER_AFTER each time
            quick = at + delay <= now and token not in self._peeked
            if quick or (
                now - at >= RECOVER_AFTER and now - self._looked.get(token, 0) >= RECOVER_AFTER
            ):
                if quick:
                    self._peeked.add(token)
                else:
                    self._looked[token] = now
                looked.add(token)
                await self._recover(sid, token, (gen, after, at), find, quick=quick)
        _, state = self.states.get(sid) or ("", None)
        if state is None or not wd.deliverable(state, time.time()):
            return
        for token, intent in list(state.get("chk", {}).items()):
            # W11, W13: a take covers every request whose batch landed before it, so
            # every intent of a state about to be taken is looked for, due or not: one
            # found is applied before the take, not after it (as a request made during
            # the lease, which would be delivered again, attempt 1, after the finish)
            if token not in looked:
                gen, after, at = intent[0], intent[1], intent[3]
                await self._recover(sid, token, (gen, after, at), find, quick=True)

    def _judge(self, sid: str, listed: list[str]) -> None:
        """Keys that listed ``sid``, which was not taken, judged on the state just
        read. A cover needs no look before the state is deliverable (rule 2): until
        the lease's end, the due time, or an intent's time if one with no key of its
        own is still to settle (it may become due once settled, with no new key).
        An intent's own key is looked at every time (it is adopted when settled).
        A key no state names is an orphan: its state may still land (rule 4), so it
        too is looked at every time, and removed once ORPHAN_AFTER has passed."""
        _, doc = self.states.get(sid) or ("", None)
        now = time.time()
        named = wd.named(doc)
        for key in listed:
            if self.keys.parse_due(key)[2] in named:
                self._orphans.pop(key)
                at = wd.deliverable_at(doc)  # an unsettled intent's time counts (rule 2)
                if at is not None and at > now:
                    self._skip[key] = at
                continue
            first = self._orphans.get(key)
            if first is None:
                self._orphans[key] = now
            elif now - first >= ORPHAN_AFTER:
                self._skip[key] = now + ORPHAN_AFTER  # its removal runs
                self.spawn(self._clear_orphan(sid, key))

    async def _clear_orphan(self, sid: str, key: str) -> None:
        """Rule 4: a conditional write of the state (as it is, with a new ``op``)
        first, so that a writer that still relies on ``key`` fails its If-Match and
        writes a fresh key; then remove ``key``."""
        nonce = self.keys.parse_due(key)[2]
        async with self.locks.hold(sid):
            etag, doc = await self._get(sid)
            if nonce in wd.named(doc):
                return  # its state landed after all
            body = dict(doc or {})
            if not await self._write(sid, self.keys.wake(sid), etag, body):
                return  # changed meanwhile: judged again at the next look
        await self._remove(key)
        self._orphans.pop(key)

    async def _prefixes(self) -> list[str]:
        """The prefixes a listing covers: the shared ones, and those of every agent
        this world took for (of every agent in the ``a/`` registry once a take for
        any agent came: one LIST more, at most every :data:`AGENTS_EVERY` seconds)."""
        agents = {a for a in self.scopes if a is not None}
        if None in self.scopes:
            if time.monotonic() - self._agents_at > AGENTS_EVERY:
                listed = await self.store.list(self.keys.agents(), limit=1000)
                self._agents = {key[len(self.keys.agents()) :] for key, _ in listed}
                self._agents_at = time.monotonic()
            agents |= self._agents
        return self.keys.due_prefixes() + [
            p for a in sorted(agents) for p in self.keys.due_prefixes(a)
        ]

    async def _list_due(self) -> list[list[str]]:
        """The first PAGE keys of each prefix of the due index, shared by the takers
        of this world that call while one listing runs: they wait for the next one,
        which starts after their calls (so it sees every key written before them),
        and take its answer (group commit)."""
        while True:
            shared = self._next_list
            if shared is None:
                return [list(p) for p in await self._lead_list()]
            try:
                return [list(p) for p in await asyncio.shield(shared)]
            except asyncio.CancelledError:
                if not shared.cancelled():
                    raise  # this taker was cancelled
                # its leader was cancelled: lead the next one

    async def _lead_list(self) -> list[list[str]]:
        """One listing of the index (see :meth:`_list_due`). After a listing that
        found the index empty, one LIST of a single key of the whole index comes
        first, and the prefixes are listed only if it finds one."""
        nxt: asyncio.Future[list[list[str]]] = asyncio.get_running_loop().create_future()
        self._next_list = nxt
        try:
            while self._listing is not None:  # the LIST in flight started before us
                await asyncio.wait([self._listing])
            self._next_list = None
            self._listing = nxt
            if self._bare and not await self.store.list(self.keys.due_index(), limit=1):
                pages: list[list[str]] = []  # still bare: 1 LIST, not 4
            else:
                prefixes = await self._prefixes()
                listed = await asyncio.gather(*(self.store.list(p, limit=PAGE) for p in prefixes))
                pages = [[k for k, _ in page] for page in listed]
            self._bare = not any(pages)
            nxt.set_result(pages)
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

    async def _take(
        self, lease: float, sid: str, agent: str | None
    ) -> tuple[str, str, int, float] | None:
        token = uuid.uuid4().hex
        taken = await self.change(sid, wd.taker(token, lease, agent))
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
            wd.holding(doc, token, now)
            assert doc is not None
            doc["L"] = [token, now + lease, doc["L"][2]]
            return doc, now + lease

        return await self.change(sid, fn, move=True)

    async def finish(self, sid: str, token: str) -> None:
        def fn(doc: Doc | None, now: float) -> tuple[Doc | None, None]:
            wd.holding(doc, token, now)
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
        for token, (gen, after, delay, *_) in doc.get("chk", {}).items():
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
        return doc is not None and not wd.empty(doc)

    async def forget(self, sid: str) -> None:
        """Remove the session's wake (``delete``, W14), then its index keys."""
        async with self.locks.hold(sid):
            _, doc = await self._get(sid)
            await self.store.delete(self.keys.wake(sid))
            self.states[sid] = ("", None)
            self.landed.pop(sid, None)  # its intents went with it
        self._drop(sid, wd.covers(doc) + list(wd.intent_keys(doc).values()))
