"""Session logs on S3: finding the tail, writing a batch, reading, compacting, deleting.

What this world knows of each session is cached in a :class:`State` (the live
generation, the last batch seen, the idempotency keys seen), for the most recently
used sessions only (:class:`~fxworld_s3._cache.Lru`); every decision to
refuse a call is taken on a state confirmed by the server (a LIST that found
nothing after the tail), every decision to write is checked by the server (the
``If-None-Match: *`` create of the next position).
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fxworld_s3._cache import DEFAULT_CACHE_SIZE, Lru
from fxworld_s3._layout import Batch, Keys, start_of
from fxworld_s3._store import Store, dumps, loads

__all__ = [
    "State",
    "Logs",
    "Write",
    "COMPACT_EVERY",
    "SEGMENT_ENTRIES",
    "segment_body",
    "parse_segment",
]

COMPACT_EVERY = 16
"""Batches past the last segment that make a writer compact them into one."""
SEGMENT_ENTRIES = 256
"""A segment grows by merging, from the writer's memory, up to this many entries."""
_TIER = 64  # a segment below this is of the first level, below SEGMENT_ENTRIES the second
_FANOUT = 4  # segments of one level merged into one of the next
_PARALLEL = 16
_STEPS = 2  # GETs of the next position before a tail lookup LISTs instead
T = TypeVar("T")


@dataclass
class State:
    """This world's view of one session's live generation."""

    gen: int
    base: int  # the newest epoch when this generation started
    tail: Batch  # the last batch known (``start_of(base)`` for an empty generation)
    firsts: list[int] = field(default_factory=list)  # known batch positions, sorted
    keys: dict[str, int] = field(default_factory=dict)  # key -> last seq of its call
    keys_from: int = 1  # keys holds every key of the batches from this position
    keys_upto: int = 0  # ... up to this seq (every key of the log: keys_from == 1)
    segments: list[tuple[int, int]] | None = None  # segment ranges, as last listed
    since_compact: int = 0  # batches landed since the last compaction looked
    recent: dict[int, Batch] = field(default_factory=dict)  # batches past the segments
    # the small segments this world wrote after the last full one: their batches
    small: dict[tuple[int, int], Segment] = field(default_factory=dict)
    marked: bool = False  # this world wrote (or found) the session's marker for ``gen``

    def saw(self, batch: Batch) -> None:
        """Record ``batch`` (read or written) in the view."""
        if not batch.real:
            return
        i = bisect.bisect_left(self.firsts, batch.first)
        if i == len(self.firsts) or self.firsts[i] != batch.first:
            self.firsts.insert(i, batch.first)
        if not batch.deleted:
            if batch.keys_from is not None:  # the keys its writer knew, before it
                self.know(batch.keys_before, batch.keys_from, batch.first - 1)
            if batch.first == self.keys_upto + 1:
                self.know(_own_key(batch), batch.first, batch.last)
        if batch.first > self.tail.first or not self.tail.real:
            self.tail = batch.slim()
        if batch.first > self.compacted() and len(self.recent) < SEGMENT_ENTRIES:
            self.recent[batch.first] = batch.slim()  # a large batch: without its entries

    def know(self, keys: dict[str, int], lo: int, hi: int) -> None:
        """Learn ``keys``: every key of the positions ``lo`` to ``hi``. Joined to what
        is known when the two ranges touch; else the later range is kept. Then
        extended through the batches held in memory."""
        if hi < lo or (self.keys_from <= lo and hi <= self.keys_upto):
            return
        if lo <= self.keys_upto + 1 and hi + 1 >= self.keys_from:
            for k, seq in keys.items():
                self.keys.setdefault(k, seq)
            self.keys_from, self.keys_upto = min(lo, self.keys_from), max(hi, self.keys_upto)
        elif hi > self.keys_upto:
            self.keys, self.keys_from, self.keys_upto = dict(keys), lo, hi
        else:
            return
        while (b := self.recent.get(self.keys_upto + 1)) is not None and not b.deleted:
            for k, seq in _own_key(b).items():
                self.keys.setdefault(k, seq)
            self.keys_upto = b.last

    def keys_known(self) -> bool:
        """Does ``keys`` hold every key of the log, up to the tail known (W6)?"""
        return self.keys_from == 1 and self.keys_upto >= self.tail.last

    def keys_until(self, last: int) -> dict[str, int] | None:
        """Every key of the positions up to ``last``, if known."""
        if self.keys_from > 1 or self.keys_upto < last:
            return None
        return {k: seq for k, seq in self.keys.items() if seq <= last}

    def compacted(self) -> int:
        """The last seq of the segment chain from 1, as last known."""
        chain = _chain(self.segments or [], 1)
        return chain[-1][1] if chain else 0

    def boundary(self, seq: int) -> int:
        """The greatest known batch position at or before ``seq`` (1 at worst)."""
        i = bisect.bisect_right(self.firsts, seq)
        return self.firsts[i - 1] if i else 1


Segment = tuple[tuple[int, int], list[Batch], dict[str, int] | None]
"""A segment's range, its batches and its key map (``None``: it carries none)."""


def _own_key(batch: Batch) -> dict[str, int]:
    return {} if batch.key is None else {batch.key: batch.last}


def with_keys(st: State, batch: Batch) -> Batch:
    """``batch`` carrying the keys of the positions between the segment chain's end
    (as known) and itself, when ``st`` knows them all; else as it is. A batch that
    loses its position is decided again, with its map, on the newer view."""
    if batch.deleted or st.keys_upto < batch.first - 1 or st.keys_from > batch.first:
        return batch
    start = max(st.keys_from, min(st.compacted(), batch.first - 1) + 1)
    before = {k: seq for k, seq in st.keys.items() if start <= seq < batch.first}
    if len(before) > SEGMENT_ENTRIES:  # bounded: a reader falls back to reading
        return batch
    return dataclasses.replace(batch, keys_from=start, keys_before=before)


class Restart(Exception):
    """The generation read was deleted: reload the state and run again."""


@dataclass
class Write:
    """What a writer decided to do at the tail: write ``batch``, or return ``result``.
    :meth:`Logs.write` returns it with ``state``: the view it was decided on."""

    batch: Batch | None = None
    result: int | None = None
    state: State | None = None


Decide = Callable[[State, bool], Write]
"""``decide(state, confirmed)``: a :class:`Write`, or raise a refusal. ``confirmed``:
no batch exists after ``state.tail`` as of a request just made. Return ``Write()`` (no
batch, no result) to ask for a confirmed tail first."""


class Logs:
    """The logs of one namespace, through one store."""

    def __init__(self, store: Store, keys: Keys, *, cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        self.store = store
        self.keys = keys
        self.states: Lru[str, State] = Lru(cache_size)  # a forgotten one is read again
        self.chores: set[asyncio.Task[None]] = set()
        self._compacting: set[str] = set()

    # -- the live generation and its tail -----------------------------------------------

    async def state(self, sid: str) -> State:
        st = self.states.get(sid)
        if st is None:
            got = await self.store.get(self.keys.gen(sid))
            gen, base = (0, 0)
            if isinstance(got, tuple):
                pointer = loads(got[0])
                gen, base = int(pointer["g"]), int(pointer["E"])
            st = self.states[sid] = State(gen, base, start_of(base))
        return st

    async def roll_forward(self, sid: str, st: State, end: Batch) -> State:
        """``end`` ends generation ``st.gen``: make sure the pointer names the next
        one (finishing a delete that died half way), and start a fresh view."""
        key = self.keys.gen(sid)
        new = {"g": st.gen + 1, "E": end.top}
        while True:
            got = await self.store.get(key)
            if isinstance(got, tuple):
                pointer = loads(got[0])
                if int(pointer["g"]) > st.gen:
                    new = {"g": int(pointer["g"]), "E": int(pointer["E"])}
                    break
                if await self.store.put_if(key, dumps(new), got[1]) is not None:
                    break
            elif await self.store.put_new(key, dumps(new)) is not None:
                break
        fresh = self.states[sid] = State(new["g"], new["E"], start_of(new["E"]))
        await self.unmark(sid, st.gen)
        return fresh

    async def refresh(self, sid: str, st: State, *, seek: bool = False) -> State:
        """Find the tail; returns the state (a new one if the generation ended),
        its tail confirmed by the server on return. The batches form a chain with
        no hole (W9), so a GET of the position after the tail that finds nothing
        confirms it; a tail far behind is found with a LIST after the segments
        (at once with ``seek``: a fresh world's keyed append, which needs the
        segments and the tail batch's key map)."""
        steps = _STEPS if seek else 0
        while True:
            tail = st.tail
            if tail.deleted:
                st = await self.roll_forward(sid, st, tail)
                steps = 0
                continue
            if steps < _STEPS:  # the next position: 404 until a batch lands there
                steps += 1
                nxt = await self.get_batch(sid, st, tail.last + 1)
                if nxt is None:
                    return st
                st.saw(nxt)
                continue
            listed = await self.store.list(
                self.keys.batches(sid, st.gen), start_after=await self._tail_start(sid, st)
            )
            for k, _ in listed:  # known positions: later reads LIST from nearer
                first = self.keys.first_of(k)
                if first not in st.firsts:
                    bisect.insort(st.firsts, first)
            if listed:
                batch = await self.get_batch(sid, st, self.keys.first_of(listed[-1][0]))
            elif not st.tail.real and not st.segments:
                return st  # no batch at all in the generation, as the LIST just found
            else:
                batch = await self._last_compacted(sid, st)
            if batch is None:  # replaced by a stub between the LIST and the GET
                st = await self.state_again(sid)
            else:
                st.saw(batch)
            steps = 0

    async def _tail_start(self, sid: str, st: State) -> str:
        """The key to LIST batches after: past the tail known and the segments."""
        if st.segments is None:
            await self._list_segments(sid, st)
        after = max(st.tail.first if st.tail.real else 0, st.compacted())
        return self.keys.batch(sid, st.gen, after) if after else ""

    async def _last_compacted(self, sid: str, st: State) -> Batch | None:
        """The last batch of the segment chain (no batch listed after it)."""
        chain = _chain(st.segments or [], 1)
        if not chain or chain[-1][1] <= st.tail.last:
            return st.tail if st.tail.real else None
        got = await self.get_segment(sid, st, chain[-1])
        if got is None:
            return st.tail if st.tail.real else None
        return got[1][-1]

    async def get_segment(self, sid: str, st: State, segment: tuple[int, int]) -> Segment | None:
        """GET a segment; its batches and key map are taken into ``st``. ``None``:
        superseded and removed (``st.segments`` is then listed again)."""
        got = await self.store.get(self.keys.segment(sid, st.gen, *segment))
        if not isinstance(got, tuple):
            st.segments = None
            return None
        batches, keys = parse_segment(got[0])
        if keys is not None:  # every key of the generation up to the segment's end (W6)
            st.know(keys, 1, segment[1])
        for b in batches:
            st.saw(b)
        return segment, batches, keys

    async def state_again(self, sid: str) -> State:
        self.states.pop(sid)
        return await self.state(sid)

    async def get_batch(self, sid: str, st: State, first: int) -> Batch | None:
        got = await self.store.get(self.keys.batch(sid, st.gen, first))
        return Batch.parse(got[0]) if isinstance(got, tuple) else None

    # -- writing ----------------------------------------------------------------------

    async def write(self, sid: str, decide: Decide, *, need_keys: bool = False) -> Write:
        """The writer loop: decide at the tail, create the next position, and on a
        lost race read the winner and decide again. Returns the :class:`Write`
        that landed (its ``batch``) or the result ``decide`` chose."""
        st = await self.state(sid)
        confirmed = False
        token: str | None = None
        while True:
            if not st.tail.real and not confirmed:
                st = await self.refresh(sid, st, seek=need_keys)
                confirmed = True
            if st.tail.deleted:
                st = await self.roll_forward(sid, st, st.tail)
                continue
            if need_keys and not st.keys_known():
                tail = st.tail
                st = await self.load_keys(sid, st)
                confirmed = confirmed and st.tail is tail  # a later tail read: not confirmed
                continue
            choice = decide(st, confirmed)
            choice.state = st
            if choice.batch is None:
                if choice.result is not None:
                    return choice
                st = await self.refresh(sid, st)  # W2/W5: refuse only on a confirmed tail
                confirmed = True
                continue
            batch = choice.batch = with_keys(st, choice.batch)
            token = batch.token
            if batch.first == 1 and not st.marked:  # before the generation's first batch
                await self.mark(sid, st.gen)
                st.marked = True
            key = self.keys.batch(sid, st.gen, batch.first)
            if await self.store.put_new(key, batch.body()) is not None:
                st.saw(batch)
                st.since_compact += 1
                self._after_write(sid, st)
                return choice
            winner = await self.get_batch(sid, st, batch.first)
            if winner is None:  # the position vanished: a delete replaced it, reload
                st = await self.state_again(sid)
                confirmed = False
                continue
            st.saw(winner)
            if winner.token == token:  # our own earlier attempt landed (a retried PUT)
                st.since_compact += 1
                self._after_write(sid, st)
                return Write(batch=winner, state=st)
            st = await self.refresh(sid, st)  # lost the race: jump to the tail
            confirmed = True

    def _after_write(self, sid: str, st: State) -> None:
        if st.since_compact >= COMPACT_EVERY and sid not in self._compacting:
            st.since_compact = 0
            self.spawn(self.compact(sid, st))

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` in the background (compaction, wake settles); ``drain`` awaits it."""
        task = asyncio.get_running_loop().create_task(coro)
        self.chores.add(task)
        task.add_done_callback(self.chores.discard)

    async def drain(self) -> None:
        """Wait for the background tasks (``close``)."""
        while self.chores:
            tasks = list(self.chores)
            await asyncio.gather(*tasks, return_exceptions=True)
            self.chores.difference_update(tasks)  # awaiting a done task does not yield

    # -- the session markers (list_sessions) ---------------------------------------------

    async def mark(self, sid: str, gen: int) -> None:
        """Make ``m/{sid}`` name generation ``gen`` or a later one. Generations only
        grow, so a marker never goes back to a body it had (no ABA on its MD5 ETag)."""
        key = self.keys.marker(sid)
        body = dumps({"g": gen})
        while await self.store.put_new(key, body) is None:
            got = await self.store.get(key)
            if not isinstance(got, tuple):
                continue  # removed between the two requests: create it again
            if int(loads(got[0])["g"]) >= gen:
                return
            if await self.store.put_if(key, body, got[1]) is not None:
                return

    async def unmark(self, sid: str, gen: int) -> None:
        """Remove ``m/{sid}`` if it names generation ``gen`` (ended) or an earlier one;
        a writer of a later generation re-marked it and keeps it (W14)."""
        key = self.keys.marker(sid)
        while True:
            got = await self.store.get(key)
            if not isinstance(got, tuple) or int(loads(got[0])["g"]) > gen:
                return
            if await self.store.delete(key, etag=got[1]):
                return

    async def list_marked(self, after: str, limit: int) -> list[str]:
        """The ids of marked sessions after ``after``, ascending (one LIST a page of
        1,000): a marker's key order is its id's order."""
        root = self.keys.markers()
        listed = await self.store.list(root, start_after=root + after, limit=limit)
        return [k[len(root) :] for k, _ in listed]

    # -- reading ----------------------------------------------------------------------

    async def batches(
        self, sid: str, st: State, after: int, limit: int, *, fill: bool = True
    ) -> tuple[list[Batch], bool]:
        """The batches holding seqs ``after+1 .. after+limit`` (as far as they
        exist), in order, and whether the read reached the tail. Raises
        :class:`Restart` if it met the generation's end. A large batch that a
        segment holds as a reference is read from its own object (``fill=False``:
        left as it is, for a caller that needs no entries)."""
        out, reached = await self._batches(sid, st, after, limit)
        refs = [b.first for b in out if b.ref] if fill else []
        if refs:
            got = await _gather(lambda f: self.get_batch(sid, st, f), refs)
            full = dict(zip(refs, got, strict=True))
            if any(b is None or b.deleted for b in full.values()):
                raise Restart
            out = [(full[b.first] or b) if b.ref else b for b in out]
        return out, reached

    async def _batches(
        self, sid: str, st: State, after: int, limit: int
    ) -> tuple[list[Batch], bool]:
        out: list[Batch] = []
        p = after + 1
        end = after + limit
        if st.segments is None or (st.segments and p <= st.segments[-1][1]):
            await self._list_segments(sid, st)
        for first, last in _chain(st.segments or [], p):
            got = await self.get_segment(sid, st, (first, last))
            if got is None:  # superseded and removed: list again
                return await self._batches(sid, st, after, limit)
            out += [b for b in got[1] if b.last >= p and b.first <= end]
            p = last + 1
            if p > end:
                return out, False
        start = st.boundary(p)
        listed = await self._list_upto(sid, st, start, end)
        firsts = [self.keys.first_of(k) for k, _ in listed]
        reached = not firsts or firsts[-1] <= end
        wanted = [f for i, f in enumerate(firsts) if f <= end and _next(firsts, i) > p]
        got_all = await _gather(lambda f: self.get_batch(sid, st, f), wanted)
        for maybe in got_all:
            if maybe is None or maybe.deleted:
                raise Restart
            st.saw(maybe)
            if maybe.last >= p:  # the batch at the boundary may end before p
                out.append(maybe)
        if len(firsts) >= 2 * COMPACT_EVERY and sid not in self._compacting:
            self.spawn(self.compact(sid, st))
        return out, reached

    async def _list_upto(self, sid: str, st: State, start: int, end: int) -> list[tuple[str, str]]:
        """Batch keys from position ``start`` on, paging until a key lies past ``end``."""
        prefix = self.keys.batches(sid, st.gen)
        after = self.keys.batch(sid, st.gen, start - 1) if start > 1 else ""
        out: list[tuple[str, str]] = []
        while True:
            page = await self.store.list(prefix, start_after=after, limit=1000)
            out += page
            if len(page) < 1000 or self.keys.first_of(page[-1][0]) > end:
                return out
            after = page[-1][0]

    async def _list_segments(self, sid: str, st: State) -> None:
        listed = await self.store.list(self.keys.segments(sid, st.gen))
        st.segments = sorted(self.keys.range_of(k) for k, _ in listed)

    async def load_keys(self, sid: str, st: State) -> State:
        """Make ``st.keys`` hold every key of the log (W6): the newest segment's map
        joined to the one the tail batch carries (from at most that segment's end
        on), else a read of the generation from what is known on."""
        if st.segments is None:
            await self._list_segments(sid, st)
        chain = _chain(st.segments or [], 1)
        if chain and (st.keys_from > 1 or st.keys_upto < chain[-1][1]):
            await self.get_segment(sid, st, chain[-1])
        if st.keys_known():
            return st
        if st.keys_from > 1:  # a later range only: read from the start
            st.keys, st.keys_from, st.keys_upto = {}, 1, 0
        while st.keys_upto < st.tail.last:
            before = st.keys_upto
            try:
                await self.batches(sid, st, st.keys_upto, 10_000, fill=False)
            except Restart:
                return await self.state_again(sid)
            if st.keys_upto == before:
                break
        return st

    # -- compaction -------------------------------------------------------------------

    async def compact(self, sid: str, st: State) -> None:
        """Copy the batches after the last segment into one segment, in levels:
        the fourth run of batches after three small segments (under ``_TIER``
        entries) is merged with them, and such a merge that follows three segments
        of the second level (under SEGMENT_ENTRIES) takes those too, while all fit
        in SEGMENT_ENTRIES. So an entry is copied about three times (a run, 64, 256),
        never rewritten with each run. The batches come from this world's memory
        when it holds them all (the writer's case), else are read.
        Safe under races: a segment is a copy of immutable batches, so two
        compactors of one range write the same object; readers take the longest
        segment at each position; a superseded segment is removed afterwards and a
        reader that misses it lists again."""
        if sid in self._compacting:
            return
        self._compacting.add(sid)
        try:
            await self._compact(sid, st)
        except Exception:  # best effort: the log is complete without segments
            pass
        finally:
            self._compacting.discard(sid)

    async def _compact(self, sid: str, st: State) -> None:
        gen = st.gen
        if st.segments is None:
            await self._list_segments(sid, st)
        chain = _chain(st.segments or [], 1)
        start = chain[-1][1] + 1 if chain else 1
        fresh = _held(st, start) or await self._read_after(sid, st, start)
        fresh = [b.slim() for b in _bounded(fresh)]  # a large batch: a reference only
        if len(fresh) < COMPACT_EVERY:
            return
        last = fresh[-1].last
        merged = _merged(chain, _entries(fresh))
        keys = st.keys_until(last)
        batches: list[Batch] = []
        for segment in merged:
            prior = await self._segment_batches(sid, st, segment)
            if prior is None:
                return
            batches += prior[1]
        if keys is None and chain:  # the map of the segment before: the keys up to it
            prior = await self._segment_batches(sid, st, chain[-1])
            if prior is None:
                return
            keys = _keys_after(prior[2], fresh)
        elif keys is None:  # the first segment: the keys of its batches
            keys = _keys_after({}, fresh)
        batches += fresh
        first = batches[0].first
        body = segment_body(batches, keys)  # keys: every key up to last (W6), or None
        await self.store.put_new(self.keys.segment(sid, gen, first, last), body)
        if keys is not None:
            st.know(keys, 1, last)
        old = [r for r in st.segments or [] if first <= r[0] and r[1] < last]
        st.segments = sorted({*(st.segments or []), (first, last)} - set(old))
        if last - first + 1 < SEGMENT_ENTRIES:  # held while a later merge may take it
            st.small[(first, last)] = ((first, last), batches, keys)
            reach = chain[-2 * (_FANOUT - 1) :][0][0] if chain else 1
            st.small = {r: s for r, s in st.small.items() if r[0] >= reach and r not in old}
        else:
            st.small.clear()
        for f in [f for f in st.recent if f <= last]:
            del st.recent[f]
        if old:  # superseded: inside the new range
            await self.store.delete_many([self.keys.segment(sid, gen, *r) for r in old])

    async def _segment_batches(
        self, sid: str, st: State, segment: tuple[int, int]
    ) -> Segment | None:
        """``segment``: from memory if this world wrote it, else a GET (``None`` if
        another compactor removed it)."""
        held = st.small.get(segment)
        if held is not None:
            return segment, list(held[1]), held[2]
        return await self.get_segment(sid, st, segment)

    async def _read_after(self, sid: str, st: State, start: int) -> list[Batch]:
        """The batches from position ``start`` on, read from the store (a world
        that did not write them): one LIST, GETs of those not in memory."""
        gen = st.gen
        listed = await self.store.list(
            self.keys.batches(sid, gen),
            start_after=self.keys.batch(sid, gen, start - 1) if start > 1 else "",
            limit=SEGMENT_ENTRIES,
        )
        firsts = [self.keys.first_of(k) for k, _ in listed]
        missing = [f for f in firsts if f not in st.recent]
        got = await _gather(lambda f: self.get_batch(sid, st, f), missing)
        fetched = dict(zip(missing, got, strict=True))
        out: list[Batch] = []
        for f in firsts:
            b = st.recent.get(f) or fetched.get(f)
            if b is None or b.deleted:
                break
            out.append(b.slim())
        return out

    # -- delete -----------------------------------------------------------------------

    async def scrub(self, sid: str, gen: int) -> None:
        """After ``delete``: remove generation ``gen``'s data. Segments are deleted;
        batches are overwritten by a stub (its key must keep existing so that a
        writer that still holds the old generation cannot create it again)."""
        for k, _ in await self.store.list(self.keys.segments(sid, gen)):
            await self.store.delete(k)
        listed = await self.store.list(self.keys.batches(sid, gen))
        stubs = [
            (k, Batch(self.keys.first_of(k), 0, 0, False, deleted=True).body()) for k, _ in listed
        ]
        await _gather(lambda i: self.store.put(*stubs[i]), range(len(stubs)))


def _chain(segments: list[tuple[int, int]], p: int) -> list[tuple[int, int]]:
    """The segments to read from position ``p`` on: at each position the longest
    segment that holds it."""
    out: list[tuple[int, int]] = []
    while True:
        best: tuple[int, int] | None = None
        for first, last in segments:
            if first <= p <= last and (best is None or last > best[1]):
                best = (first, last)
        if best is None:
            return out
        out.append(best)
        p = best[1] + 1


def _merged(chain: list[tuple[int, int]], fresh: int) -> list[tuple[int, int]]:
    """The last segments of ``chain`` that a new segment of ``fresh`` entries after
    them takes in (see :meth:`Logs.compact`): none, or three of the first level, or
    those and three of the second before them."""
    sizes = [b - a + 1 for a, b in chain]
    out: list[tuple[int, int]] = []
    total = fresh
    for tier in (_TIER, SEGMENT_ENTRIES):
        start = len(chain) - len(out)
        run = start
        while run > 0 and sizes[run - 1] < tier and start - run < _FANOUT - 1:
            run -= 1
        taken = sum(sizes[run:start])
        if start - run < _FANOUT - 1 or total + taken > SEGMENT_ENTRIES:
            break
        out = chain[run:start] + out
        total += taken
    return out


def _held(st: State, start: int) -> list[Batch]:
    """The batches from position ``start`` to the known tail, if this world holds
    all of them in memory (it wrote or read them); else ``[]``."""
    out: list[Batch] = []
    p = start
    while p <= st.tail.last:
        b = st.recent.get(p)
        if b is None or b.deleted:
            return []
        out.append(b)
        p = b.last + 1
    return out


def _bounded(batches: list[Batch]) -> list[Batch]:
    """The first of ``batches`` that hold at most SEGMENT_ENTRIES entries (one at least)."""
    out: list[Batch] = []
    for b in batches:
        if out and _entries(out) + b.count > SEGMENT_ENTRIES:
            break
        out.append(b)
    return out


def _keys_after(keys: dict[str, int] | None, batches: list[Batch]) -> dict[str, int] | None:
    """``keys`` (every key before ``batches``, or ``None``: not known) and theirs."""
    if keys is None:
        return None
    out = dict(keys)
    for b in batches:
        for k, seq in _own_key(b).items():
            out.setdefault(k, seq)
    return out


def segment_body(batches: list[Batch], keys: dict[str, int] | None) -> bytes:
    """A segment's object: the list of its batches; the last one also carries ``S``,
    when known, the generation's key map up to the segment's end (a world of an
    earlier version reads the list and ignores the field)."""
    out = [b.slim().to_json() for b in batches]
    if keys is not None:
        out[-1]["S"] = keys
    return dumps(out)


def parse_segment(body: bytes) -> tuple[list[Batch], dict[str, int] | None]:
    """A segment's batches and key map (``None``: not carried, as in a segment
    written by an earlier version)."""
    d = loads(body)
    keys = d[-1].get("S") if d else None
    batches = [Batch.from_json(b) for b in d]
    return batches, None if keys is None else {str(k): int(s) for k, s in keys.items()}


def _entries(batches: list[Batch]) -> int:
    return batches[-1].last - batches[0].first + 1 if batches else 0


def _next(firsts: list[int], i: int) -> int:
    return firsts[i + 1] if i + 1 < len(firsts) else 2**63


async def _gather(fn: Callable[[int], Awaitable[T]], items: Iterable[int]) -> list[T]:
    """``fn(item)`` for every item, concurrently but a few requests at a time, in order."""
    sem = asyncio.Semaphore(_PARALLEL)

    async def one(item: int) -> T:
        async with sem:
            return await fn(item)

    return list(await asyncio.gather(*(one(item) for item in items)))
