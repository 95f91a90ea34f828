"""S3World: see the package docstring for URL, options and capabilities."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

from aiobotocore.session import AioSession

from fxworld import jsondata, validate
from fxworld.errors import ConfigurationError, Conflict, Fenced
from fxworld.types import Entry, Fence, NewEntry, WakeLease, WakeState
from fxworld.urls import mask, split_query
from fxworld_s3._cache import DEFAULT_CACHE_SIZE, KeyedLocks, Lru
from fxworld_s3._follow import Poller
from fxworld_s3._layout import LARGEST_ENTRY, Batch, Keys, start_of
from fxworld_s3._log import Logs, Restart, State, Write
from fxworld_s3._store import Store, dumps, loads
from fxworld_s3._wakedoc import unchanged
from fxworld_s3._wakes import Wakes

__all__ = ["S3World"]

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_URL_OPTIONS = ("endpoint_url", "region", "namespace", "max_entry_bytes")
_UNOWNED_FOR = 60.0  # s: a session seen with no owner is not asked again when written
_CHECKED: set[tuple[str, str, int]] = set()  # (endpoint, bucket, client) setup() found fit


class S3World:
    """A World on S3-compatible object storage, built from conditional writes alone.

    ``bucket`` is created by :meth:`setup` if absent. Keys live under
    ``{prefix}{namespace}/``; worlds with different namespaces share nothing.
    ``endpoint_url`` names a non-AWS server (MinIO, SeaweedFS, R2, ...);
    ``region`` defaults to the AWS chain's (``us-east-1`` with an endpoint).
    ``client`` is the application's aiobotocore S3 client (left open by
    :meth:`close`) or an ``AioSession`` to make one from. Credentials come from the
    standard AWS chain (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, a profile,
    an instance role), never from a URL. ``cache_size``: how many sessions' state
    (log tail, idempotency keys, wake state) the world keeps in memory, the most
    recently used (default 10,000, a few MB); a session beyond it costs a request
    or two more, never a wrong answer.
    """

    capabilities: frozenset[str] = frozenset({"durable", "shared"})

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "",
        namespace: str = "default",
        endpoint_url: str | None = None,
        region: str | None = None,
        client: Any = None,
        max_entry_bytes: int = validate.DEFAULT_MAX_ENTRY_BYTES,
        request_budget: float = 25.0,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        if not isinstance(bucket, str) or _BUCKET.fullmatch(bucket) is None:
            raise ConfigurationError(f"{bucket!r} is not an S3 bucket name (3..63 of a-z 0-9 . -)")
        if not isinstance(prefix, str) or prefix.startswith("/") or "//" in prefix:
            raise ConfigurationError(f"prefix {prefix!r} must be a relative key prefix")
        if any(segment in (".", "..") for segment in prefix.split("/")):
            # W15: a server that normalises paths would put the keys elsewhere
            raise ConfigurationError(f"prefix {prefix!r} has a '.' or '..' segment")
        if endpoint_url is not None and (
            not isinstance(endpoint_url, str) or "@" in endpoint_url.split("?")[0]
        ):
            raise ConfigurationError(
                "endpoint_url must be an http(s) URL without credentials: "
                f"{mask(str(endpoint_url))}; credentials come from the AWS chain"
            )
        max_entry_bytes = validate.max_entry_bytes(
            max_entry_bytes, largest=LARGEST_ENTRY, why="one S3 object of 5 GiB, escaped JSON"
        )
        if not isinstance(cache_size, int) or isinstance(cache_size, bool) or cache_size < 1:
            raise ConfigurationError(f"cache_size must be an int >= 1: {cache_size!r}")
        self.cache_size = cache_size
        self.bucket = bucket
        self.prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
        self.namespace = validate.namespace(namespace)
        self.endpoint_url = endpoint_url
        self.region = region
        self.max_entry_bytes = max_entry_bytes
        session = client if isinstance(client, AioSession) else None
        given = None if session is not None else client
        self.store = Store(
            bucket,
            endpoint_url=endpoint_url,
            region=region,
            client=given,
            session=session,
            budget=request_budget,
        )
        self.keys = Keys(f"{self.prefix}{self.namespace}/")
        self._fresh()

    def _fresh(self) -> None:
        """Per event loop: the caches, locks and background tasks."""
        self.logs = Logs(self.store, self.keys, cache_size=self.cache_size)
        self.wakes = Wakes(self.store, self.keys, self.logs.spawn, cache_size=self.cache_size)
        self.poller = Poller(self._landed)  # the followers' one poller (fxworld_s3/_follow.py)
        # Writes of one session from this world go one at a time: they would only
        # race each other for the same position.
        self.locks = KeyedLocks()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.owners: Lru[str, str] = Lru(self.cache_size)  # sid -> owner (W19: set once)
        self._registered: set[str] = set()  # agents this world wrote into a/
        self._unowned: Lru[str, float] = Lru(self.cache_size)  # sid -> when seen unowned

    @classmethod
    def from_url(cls, url: str) -> S3World:
        """``s3://bucket/prefix?endpoint_url=...&region=...&namespace=...&max_entry_bytes=n``."""
        base, params = split_query(url)
        if not base.startswith("s3://"):
            raise ConfigurationError(f"S3World takes s3://bucket/prefix URLs, not {mask(url)}")
        unknown = sorted(set(params) - set(_URL_OPTIONS))
        if unknown:
            raise ConfigurationError(
                f"unknown option(s) {', '.join(unknown)} in {mask(url)} "
                f"(known: {', '.join(_URL_OPTIONS)})"
            )
        bucket, _, prefix = base[len("s3://") :].partition("/")
        if "@" in bucket:
            raise ConfigurationError(
                f"credentials do not go in an s3:// URL ({mask(url)}); set "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or use a profile"
            )
        size = params.get("max_entry_bytes", str(validate.DEFAULT_MAX_ENTRY_BYTES))
        if not size.isdigit():
            raise ConfigurationError(f"max_entry_bytes must be an integer in {mask(url)}")
        return cls(
            bucket,
            prefix=prefix,
            namespace=params.get("namespace", "default"),
            endpoint_url=params.get("endpoint_url") or None,
            region=params.get("region") or None,
            max_entry_bytes=int(size),
        )

    def __repr__(self) -> str:
        where = f", endpoint_url={mask(self.endpoint_url)!r}" if self.endpoint_url else ""
        return (
            f"S3World(bucket={self.bucket!r}, prefix={self.prefix!r}, "
            f"namespace={self.namespace!r}{where})"
        )

    async def _here(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            if self._loop is not None:
                self._fresh()
            self._loop = loop

    # -- lifecycle ------------------------------------------------------------------

    async def setup(self) -> None:
        """Create the bucket if absent, and check that the server refuses a second
        ``If-None-Match: *`` create of one key (else W2 and W4 would break)."""
        await self._here()
        checked = (self.store.endpoint, self.bucket, id(self.store.given))
        if checked in _CHECKED:  # this process already checked this bucket on this server
            return
        await self.store.ensure_bucket()
        key = self.keys.probe(uuid.uuid4().hex)
        try:
            first = await self.store.put_new(key, b"1")
            second = await self.store.put_new(key, b"2")
        finally:
            await self.store.delete(key)
        if first is None or second is not None:
            raise ConfigurationError(
                f"the S3 server at {self.store.endpoint} does not honour conditional writes "
                "(a second PUT with If-None-Match: * was not refused with 412); S3World "
                "needs them to keep W2 and W4: use AWS S3, MinIO, SeaweedFS or R2"
            )
        _CHECKED.add(checked)

    async def drop_namespace(self) -> None:
        """Delete every object under ``{prefix}{namespace}/``
        (``fxworld.protocol.NamespaceDropper``), once this world's own background
        writes (compactions, wake settles) have ended: a LIST and a DELETE of up to
        1,000 keys per round, until none is left. The bucket stays: namespaces
        share it; a missing bucket holds nothing to drop (and is not created)."""
        await self._here()
        await self.logs.drain()
        root = self.keys.root
        while keys := [key for key, _ in await self.store.list(root, limit=1000, missing_ok=True)]:
            await self.store.delete_many(keys)
        self._fresh()  # as if new: no cached tail, key or wake state of the old one

    async def close(self) -> None:
        if self._loop is asyncio.get_running_loop():
            await self.logs.drain()  # compactions and wake settles
        await self.store.close()

    # -- append-with-fence ------------------------------------------------------------

    async def acquire(self, session_id: str) -> Fence:
        validate.session_id(session_id)
        await self._here()
        token = uuid.uuid4().hex

        def decide(st: State, confirmed: bool) -> Write:
            tail = st.tail
            epoch = tail.top + 1  # W1: greater than every epoch in this log and before it
            data = json.dumps({"epoch": epoch})
            items = [(validate.FENCE_KIND, data)]
            return Write(
                Batch(
                    tail.last + 1, 1, epoch, True, epoch, token=token, at=time.time(), items=items
                )
            )

        async with self.locks.hold(session_id):
            done = await self.logs.write(session_id, decide)
        assert done.batch is not None
        return Fence(session_id, done.batch.top, done.batch.first)

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
        validate.session_id(session_id)
        encoded = validate.entries(entries, max_bytes=self.max_entry_bytes)
        validate.append_args(session_id, fence=fence, expect=expect, key=key, wake=wake)
        await self._here()
        token = uuid.uuid4().hex
        epoch = fence.epoch if fence is not None else None

        def decide(st: State, confirmed: bool) -> Write:
            tail = st.tail
            if key is not None and key in st.keys:
                return Write(result=st.keys[key])  # W6: checked first, writes nothing
            if epoch is not None:
                if tail.top > epoch:  # W2: a newer fence is in the log, for good
                    raise Fenced(session_id, epoch, tail.top)
                if not (tail.held and tail.top == epoch):
                    if not confirmed:
                        return Write()
                    raise Fenced(session_id, epoch, tail.top if tail.held else None)
            if expect is not None and expect != tail.last:  # W5
                if not confirmed:
                    return Write()
                raise Conflict(session_id, expect, tail.last)
            batch = Batch(
                tail.last + 1,
                len(encoded),
                tail.top,
                tail.held,
                epoch,
                key=key,
                token=token,
                wake=wake,
                at=time.time(),
                items=encoded,
            )
            return Write(batch)

        async with self.locks.hold(session_id):
            if wake is not None:  # W7: the intent is stored before the batch
                st = await self.logs.state(session_id)
                owner = await self._owner_to_write(session_id)  # W19: key under its prefix
                await self.wakes.intend(session_id, token, st.gen, st.tail.last, wake, owner)
            try:
                done = await self.logs.write(session_id, decide, need_keys=key is not None)
            except (Fenced, Conflict):
                if wake is not None:
                    await self.wakes.settle(session_id, token, None)
                raise
        if done.batch is None:  # a keyed repeat: no wake owed (W6, W7)
            if wake is not None:
                await self.wakes.settle(session_id, token, None)
            assert done.result is not None
            return done.result
        if wake is not None:  # W7: the intent makes it owed; settled in the background
            self.wakes.settle_later(session_id, token, done.batch.at)
        return done.batch.last

    # -- read-from-cursor ---------------------------------------------------------------

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        validate.session_id(session_id)
        validate.read_args(after, limit)
        await self._here()
        while True:
            st = await self.logs.state(session_id)
            try:
                batches, reached = await self.logs.batches(session_id, st, after, limit)
            except Restart:
                await self._restart(session_id, st)
                continue
            if not reached and not await self._still_live(session_id, st):
                continue
            return _entries(session_id, batches, after, limit)

    async def _restart(self, sid: str, st: State) -> None:
        """A read met the end of its generation: find the live one (``refresh``
        rolls forward past the deleted batch)."""
        await self.logs.refresh(sid, st)

    async def _still_live(self, sid: str, st: State) -> bool:
        """A read that stopped before the tail: is its generation still the live one?"""
        pointer = await self.logs.state_again(sid)
        if pointer.gen == st.gen:
            self.logs.states[sid] = st
            return True
        return False

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Entry]:
        validate.session_id(session_id)
        validate.read_args(after, 1)
        return self._follow(session_id, after)

    async def _follow(self, session_id: str, after: int) -> AsyncIterator[Entry]:
        """W10: read what is there, then wait until a batch lands at the next
        position (or the session stays quiet for QUIET seconds), asked by the one
        poller that the world's followers share. A read reached the tail this world
        knows, so after it the follower waits (the poller asks the position after
        that tail) unless that tail is already past what it yielded."""
        await self._here()
        poller = self.poller
        cursor = after
        while True:
            seen = poller.version(session_id)  # before the read: no change slips between
            batch = self._landed_next(session_id, cursor) or await self.read(session_id, cursor)
            for entry in batch:
                cursor = entry.seq
                yield entry
            st = self.logs.states.get(session_id)
            if not batch or st is None or st.tail.last <= cursor:
                await poller.wait(session_id, seen, cursor)

    async def _landed(self, session_id: str, cursor: int) -> bool:
        """Whether a batch past ``cursor`` has landed: the tail this world knows is
        past it, or the position after that tail exists (one GET, 404 until a batch
        lands there: the chain has no hole, W9, W10)."""
        st = await self.logs.state(session_id)
        if st.tail.last > cursor:
            return True
        landed = await self.logs.get_batch(session_id, st, st.tail.last + 1)
        if landed is None:
            return False
        st.saw(landed)  # the follower takes it from here, with no read (_landed_next)
        return True

    def _landed_next(self, session_id: str, cursor: int) -> list[Entry]:
        """The entries of the batch right after ``cursor`` if this world holds it
        (the poller just found it landed, or this world wrote it): committed, in
        order, so a follower yields them without a request (W10)."""
        st = self.logs.states.get(session_id)
        batch = None if st is None else st.recent.get(cursor + 1)
        if batch is None or batch.deleted or not batch.count or batch.ref:
            return []  # a large batch is held without its entries: read it
        return _entries(session_id, [batch], cursor, batch.count)

    # -- enqueue-wake ------------------------------------------------------------------

    async def wake(self, session_id: str, *, delay: float = 0.0) -> None:
        validate.session_id(session_id)
        seconds = validate.delay(delay)
        await self._here()
        await self.wakes.request(session_id, seconds, await self._owner_to_write(session_id))

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        taken = await self._take(validate.lease(lease), 1)
        return taken[0] if taken else None

    async def take_wakes(self, *, lease: float, limit: int = 10) -> list[WakeLease]:
        """Up to ``limit`` due wakes from one LIST of the wake states, each taken
        with its own conditional write, as ``take_wake`` takes one (W11-W13 per wake)."""
        seconds = validate.lease(lease)
        return await self._take(seconds, validate.wake_batch(limit))

    async def _take(self, lease: float, limit: int, agent: str | None = None) -> list[WakeLease]:
        await self._here()
        taken = await self.wakes.take(lease, self._find, limit, agent, self.owner)
        return [
            WakeLease(sid, token, n, _time(until), self._owner_known(sid))
            for sid, token, n, until in taken
        ]

    def _owner_known(self, sid: str) -> str | None:
        """The owner this world knows of: cached, or written in the wake state it
        just took (W19: ``WakeLease.agent``)."""
        _, doc = self.wakes.states.get(sid) or ("", None)
        return self.owners.get(sid) or (doc or {}).get("a")

    # -- AgentRouter (W19): o/{sid} created once, per-agent due index prefixes ------------

    async def claim(self, session_id: str, agent: str) -> str:
        """Record ``agent`` as the owner unless one is recorded: ``o/{sid}`` created
        with ``If-None-Match: *`` (one writer wins; a loser reads the winner). Then
        the session's wake state, if any, is written with the owner, which moves its
        index key under the owner's prefix (``fxworld.protocol.AgentRouter``)."""
        validate.session_id(session_id)
        validate.agent_name(agent)  # W15: before any I/O
        await self._here()
        while True:
            known = await self.owner(session_id)
            if known is not None:
                return known
            if await self.store.put_new(self.keys.owner(session_id), dumps({"agent": agent})):
                break
        self.owners[session_id] = agent
        self._unowned.pop(session_id)
        if agent not in self._registered:  # a take for any agent lists a/ for the prefixes
            await self.store.put(self.keys.agent(agent), b"1")
            self._registered.add(agent)
        await self.wakes.change(session_id, unchanged, agent=agent)
        return agent

    async def owner(self, session_id: str) -> str | None:
        """The recorded owner: cached once seen (it never changes while the session
        lives), else one GET of ``o/{sid}``."""
        validate.session_id(session_id)
        await self._here()
        cached = self.owners.get(session_id)
        if cached is not None:
            return cached
        got = await self.store.get(self.keys.owner(session_id))
        if not isinstance(got, tuple):
            self._unowned[session_id] = time.monotonic()
            return None
        found = str(loads(got[0])["agent"])
        self.owners[session_id] = found
        return found

    async def rename_agent(self, old: str, new: str) -> int:
        """Give every session of agent ``old`` to ``new`` (a rename the application asks
        for, with no worker of either name running): a LIST of ``o/``, a GET of each
        owner record, a conditional PUT of each of ``old``'s, then its wake state
        written with ``new`` (its index key moves under ``new``'s prefix, W19)."""
        old, new = validate.agent_name(old), validate.agent_name(new)
        await self._here()
        moved, root, after = 0, self.keys.owner(""), ""
        while page := await self.store.list(root, start_after=after, limit=1000):
            after = page[-1][0]
            for key, _ in page:
                got = await self.store.get(key)
                if isinstance(got, tuple) and loads(got[0]).get("agent") == old:
                    if await self.store.put_if(key, dumps({"agent": new}), got[1]):
                        sid = key[len(root) :]
                        self.owners[sid] = new
                        await self.store.put(self.keys.agent(new), b"1")
                        await self.wakes.change(sid, unchanged, agent=new)
                        moved += 1
        return moved

    async def _owner_to_write(self, session_id: str) -> str | None:
        """The owner a wake state is written with: as :meth:`owner`, but a session
        found unowned within the last :data:`_UNOWNED_FOR` seconds is not asked
        again (an append with a wake costs no GET more). A claim made meanwhile by
        another process leaves the state unnamed for that long, its key in a shared
        prefix: a take for an agent asks the owner record itself before it takes
        such a state (W19), and writes the owner in."""
        seen = self._unowned.get(session_id)
        if seen is not None and time.monotonic() - seen < _UNOWNED_FOR:
            return self.owners.get(session_id)
        return await self.owner(session_id)

    async def take_wakes_for(self, agent: str, *, lease: float, limit: int = 10) -> list[WakeLease]:
        """``take_wakes`` from the shared prefixes of the due index and ``agent``'s
        own only (W19): other agents' keys are never listed."""
        validate.agent_name(agent)
        seconds = validate.lease(lease)
        return await self._take(seconds, validate.wake_batch(limit), agent)

    async def _find(self, sid: str, gen: int, after: int, token: str, quick: bool) -> float | None:
        """The commit time of the batch ``token`` wrote, if it is in the live log
        (``quick``: first one GET of the position after ``after``, which holds it
        unless another writer's batch took that position first)."""
        if quick:
            got = await self.store.get(self.keys.batch(sid, gen, after + 1))
            batch = Batch.parse(got[0]) if isinstance(got, tuple) else None
            if batch is None:
                return None  # nothing landed after `after` (no hole, W9): nor has it
            if batch.token == token and not batch.deleted:
                return batch.at
            # another batch is there (or a deleted generation's): this one may have
            # landed after it, or in the live generation (W11, W13)
        st = await self.logs.refresh(sid, await self.logs.state(sid))
        if st.gen != gen:
            after = 0
        while True:
            try:
                batches, reached = await self.logs.batches(sid, st, after, 100_000, fill=False)
            except Restart:
                return None
            for b in batches:
                if b.token == token:
                    return b.at
            if reached or not batches:
                return None
            after = batches[-1].last

    async def wake_state(self, session_id: str) -> WakeState | None:
        """The session's pending wake, read from its wake state (``WakeLister``)."""
        validate.session_id(session_id)
        await self._here()
        got = await self.wakes.view(session_id, self._find)
        if got is None:
            return None
        due, until, attempt = got
        return WakeState(session_id, _time(due), None if until is None else _time(until), attempt)

    async def list_wakes(self, *, after: str = "", limit: int = 100) -> list[WakeState]:
        """Pending wakes by ascending session id after ``after``: LISTs of the wake
        states (up to 1,000 a page), and one GET per state (``WakeLister``)."""
        after = validate.list_args(after, limit)
        await self._here()
        root = self.keys.wakes()
        out: list[WakeState] = []
        while len(out) < limit:
            size = min(1000, limit - len(out))
            page = await self.store.list(root, start_after=root + after, limit=size)
            sids = [k[len(root) :] for k, _ in page]
            states = await asyncio.gather(*map(self.wake_state, sids))
            out += [st for st in states if st is not None]
            if len(page) < size:
                return out
            after = sids[-1]
        return out

    async def renew_wake(self, wake: WakeLease, *, lease: float) -> WakeLease:
        seconds = validate.lease(lease)
        validate.held(wake)
        await self._here()
        until = await self.wakes.renew(wake.session_id, wake.token, seconds)
        return WakeLease(wake.session_id, wake.token, wake.attempt, _time(until))

    async def finish_wake(self, wake: WakeLease) -> None:
        validate.held(wake)
        await self._here()
        await self.wakes.finish(wake.session_id, wake.token)

    # -- lifecycle of sessions ----------------------------------------------------------

    async def list_sessions(self, *, after: str = "", limit: int = 100) -> list[str]:
        """Ids of sessions with a non-empty log, ascending, greater than ``after``:
        one LIST per 1,000 of the markers written before each generation's first
        batch and removed by :meth:`delete`. A writer that died between its marker
        and its first batch leaves its session listed, with an empty log."""
        after = validate.list_args(after, limit)
        await self._here()
        return await self.logs.list_marked(after, limit)

    async def last_entry(self, session_id: str) -> Entry | None:
        """The log's last entry, or ``None`` (``fxworld.protocol.LastEntryReader``):
        the tail lookup, whose last request read the tail batch or found nothing
        after it. With the session cached: 1 GET of the next position (404); in a
        fresh world: 1 GET ``g`` + 1 GET ``b/1``, and for a longer log 1 GET of the
        next position, then 1 LIST of the segments + 1 LIST of the batches after
        them + 1 GET of the last one + 1 GET of the next position (404)."""
        validate.session_id(session_id)
        await self._here()
        st = await self.logs.refresh(session_id, await self.logs.state(session_id))
        tail = st.tail  # confirmed: nothing after it (W9: the chain has no hole)
        if tail.ref:  # a large batch is held without its entries: read its object
            tail = await self.logs.get_batch(session_id, st, tail.first) or start_of(0)
        if not tail.real or tail.deleted or not tail.count:
            return None  # (a large tail gone: the session was deleted meanwhile)
        return _entries(session_id, [tail], tail.last - 1, 1)[0]

    async def delete_if_idle(self, session_id: str, *, last: int) -> bool:
        """``delete`` only if the log still ends at ``last`` and no wake is pending
        (``fxworld.protocol.IdleDeleter``). The wake state is read first (1 GET);
        then the tail is confirmed (1 GET of the next position) and position
        ``last + 1`` is claimed with the batch that ends a generation, created with
        ``If-None-Match: *``: an append racing it loses its own create there, reads
        the end and lands in the next generation (W4). From the claim on, any
        writer or reader that meets it finishes the delete (the roll-forward of a
        delete that died half way), so a claim cannot be withdrawn: the wake is
        checked before it. A ``wake()`` that arrives between that GET and the
        claim is kept, as a wake of the emptied session (W14: this delete removes
        no wake, it saw none; W13: no request is lost)."""
        validate.session_id(session_id)
        validate.last_seq(last)
        await self._here()
        token = uuid.uuid4().hex

        def decide(st: State, confirmed: bool) -> Write:
            tail = st.tail
            if not confirmed:
                return Write()  # decide on the tail the server holds now
            if not tail.real or tail.last != last:
                return Write(result=0)  # empty, or changed since it was looked at
            end = Batch(last + 1, 0, tail.top, False, token=token, at=time.time(), deleted=True)
            return Write(end)  # the claim: the token makes its body (and ETag) unique

        async with self.locks.hold(session_id):
            # W7, W11-W13: a due wake, a lease, or the intent of an append with
            # wake= (stored before its batch) keeps the session
            if await self.wakes.pending(session_id):
                return False
            done = await self.logs.write(session_id, decide)
            if done.batch is None:
                return False
            st = done.state  # the generation the claim ended
            assert st is not None
            await self.logs.roll_forward(session_id, st, done.batch)
            await self.logs.scrub(session_id, st.gen)
        await self._forget_owner(session_id)
        return True

    async def delete(self, session_id: str) -> None:
        """Ends the live generation with a batch marked deleted at the next position
        (so no stale writer can land after it), points ``g`` at a new, empty
        generation whose epochs continue (W1, W14), then removes the old data and
        the wake."""
        validate.session_id(session_id)
        await self._here()
        token = uuid.uuid4().hex

        def decide(st: State, confirmed: bool) -> Write:
            tail = st.tail
            if not tail.real and not tail.held:
                return Write(result=0) if confirmed else Write()  # nothing to delete
            end = Batch(
                tail.last + 1, 0, tail.top, False, token=token, at=time.time(), deleted=True
            )
            return Write(end)

        async with self.locks.hold(session_id):
            done = await self.logs.write(session_id, decide)
            if done.batch is not None:
                st = done.state  # the generation this batch ended (not a cached view)
                assert st is not None
                await self.logs.roll_forward(session_id, st, done.batch)
                await self.logs.scrub(session_id, st.gen)
        await self.wakes.forget(session_id)
        await self._forget_owner(session_id)

    async def _forget_owner(self, session_id: str) -> None:
        """W14, W19: the owner record goes with the session."""
        await self.store.delete(self.keys.owner(session_id))
        self.owners.pop(session_id)
        self._unowned.pop(session_id)


def _entries(sid: str, batches: list[Batch], after: int, limit: int) -> list[Entry]:
    out: list[Entry] = []
    for b in batches:
        at = _time(b.at)
        for i, (kind, data) in enumerate(b.items):
            seq = b.first + i
            if after < seq <= after + limit:
                out.append(Entry(sid, seq, kind, jsondata.decode(data), b.epoch, at))
    return out


def _time(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
