"""RedisWorld: see the package docstring for URL, options and capabilities."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import urlencode

from redis.asyncio import BlockingConnectionPool, Redis, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from fxworld import validate
from fxworld.errors import (
    BackendUnavailable,
    ConfigurationError,
    Conflict,
    Fenced,
    LeaseLost,
)
from fxworld.types import Entry, Fence, NewEntry, WakeLease, WakeState
from fxworld.urls import mask, parse, split_query
from fxworld_redis import _errors, _rename, _scripts, _settings
from fxworld_redis._budget import Budget
from fxworld_redis._deadline import Deadlines
from fxworld_redis._follow import Waits
from fxworld_redis._scripts import Keys, text
from fxworld_redis._take import Takes

__all__ = ["RedisWorld"]

_SCHEMES = ("redis", "rediss")
_OWN_OPTIONS = ("namespace", "cluster", "partitions", "max_entry_bytes", "durable")
_BACKOFF = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)  # ~3 s: long enough for a restart's AOF load
_RELOADS = 3
_MAX_PARTITIONS = 1024
_DEFAULT_PARTITIONS = {False: 1, True: 16}  # one server / a Cluster
_FOLLOW_BLOCK_MS = 1000
POOL_SIZE = 8
"""The connection budget of one world, per server (per node on a Cluster): calls
past this many connections wait for a free one (``?max_connections=`` sets another,
at least 2), the followers' shared ``XREAD`` included (see ``_budget``)."""
_CALL_TIMEOUT = 30.0  # s: > follow's XREAD BLOCK; a stalled link ends
_US = 1_000_000
_Client = Redis | RedisCluster


class RedisWorld:
    """A World on Redis or Redis Cluster: shared by any number of processes, push
    follow, and ``durable`` when the server fsyncs every write (see ``setup``).

    ``url_or_client`` is a ``redis://`` or ``rediss://`` URL, or the application's
    own ``redis.asyncio.Redis`` / ``RedisCluster`` (left open by :meth:`close`; it
    must be made with ``retry=Retry(NoBackoff(), 0)``, because redis-py's automatic
    resend of a script whose connection broke could land a fenced append twice: the
    world retries what is safe to repeat itself). ``namespace`` separates worlds on
    one server. ``partitions`` is the number of wake queues, fixed by the first
    ``setup()`` of the namespace (default 1 on one server, 16 on a Cluster); a world
    opened later with another number is refused. ``durable`` decides the capability
    where the server hides ``CONFIG``; elsewhere the server's settings decide, and
    ``durable=False`` also accepts a server that may evict keys (see ``setup``).
    """

    def __init__(
        self,
        url_or_client: str | Redis | RedisCluster,
        *,
        namespace: str | None = None,
        max_entry_bytes: int = validate.DEFAULT_MAX_ENTRY_BYTES,
        partitions: int | None = None,
        durable: bool | None = None,
        cluster: bool | None = None,
    ) -> None:
        self._url = ""
        self._make: Any = None  # builds our own client again (for a new event loop)
        if isinstance(url_or_client, str):
            base, own = _own_options(url_or_client)
            namespace = namespace if namespace is not None else own.get("namespace")
            max_entry_bytes = validate.max_entry_bytes(own.get("max_entry_bytes", max_entry_bytes))
            if partitions is None and "partitions" in own:
                partitions = int(own["partitions"])
            if durable is None and "durable" in own:
                durable = _flag(own["durable"], "durable", url_or_client)
            if cluster is None:
                cluster = _flag(own.get("cluster", "false"), "cluster", url_or_client)
            self._url = mask(url_or_client)
            self.connection_budget = _budget_of(base)
            self._make = _client_factory(base, cluster, self.connection_budget)
            self._client: _Client = self._make()
            self._owns_client = True
        elif isinstance(url_or_client, (Redis, RedisCluster)):
            _check_no_resend(url_or_client)
            cluster = isinstance(url_or_client, RedisCluster)
            self.connection_budget = _given_budget(url_or_client)
            self._client = url_or_client
            self._owns_client = False
        else:
            raise ConfigurationError(
                "RedisWorld takes a redis:// URL or a redis.asyncio.Redis/RedisCluster, "
                f"not {type(url_or_client).__name__}"
            )
        self.namespace = validate.namespace("default" if namespace is None else namespace)
        if partitions is not None and (
            not isinstance(partitions, int) or not 1 <= partitions <= _MAX_PARTITIONS
        ):
            raise ConfigurationError(
                f"partitions must be an integer from 1 to {_MAX_PARTITIONS}: {partitions!r}"
            )
        self.max_entry_bytes = validate.max_entry_bytes(
            max_entry_bytes, largest=_settings.LARGEST_ENTRY, why="Redis' 512 MB argument"
        )
        self.cluster = bool(cluster)
        self._asked_partitions = partitions
        self._durable_arg = durable
        self.partitions = partitions or _DEFAULT_PARTITIONS[self.cluster]
        self._parts = _partitions(self.namespace, self.partitions)  # again at setup()
        # ``durable`` only once setup() checked the server (W17)
        self.capabilities: frozenset[str] = frozenset({"shared", "push_follow"})
        self._sha = {name: _sha1(script) for name, script in _SCRIPTS.items()}
        self._ready = False
        self._ready_lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deadlines: Deadlines  # made for each event loop, with the loop
        self._waits: Waits  # the followers waiting on this loop (one XREAD per partition)
        self._budget: Budget | None = None  # Cluster: calls wait for a free connection
        self._takes: Takes  # the takes (and a Cluster's peek hints), made with the loop
        self._closed = False

    @classmethod
    def from_url(cls, url: str) -> RedisWorld:
        """``redis://[user:password@]host:port/db`` or ``rediss://`` (TLS), with
        ``?namespace=&cluster=true&partitions=N&max_entry_bytes=N&durable=true``;
        other query parameters go to redis-py."""
        return cls(url)

    def __repr__(self) -> str:
        where = self._url or f"<{type(self._client).__name__} given>"
        return f"RedisWorld({where!r}, namespace={self.namespace!r})"

    @property
    def client(self) -> Redis | RedisCluster:
        """The redis-py client this world uses."""
        return self._client

    # -- lifecycle ------------------------------------------------------------------

    async def setup(self) -> None:
        """Check the server's settings, fix the namespace's partition count, load
        the scripts.

        Idempotent and safe from several processes at once. A server whose
        ``maxmemory-policy`` may evict keys (``allkeys-*``) is refused with a
        ``ConfigurationError``, unless the world was opened with ``durable=False``.
        The capability ``durable`` is declared only if every primary runs
        ``appendonly yes`` with ``appendfsync always`` and may not evict
        (``durable=True`` on a server without them is refused); where ``CONFIG``
        is disabled, the ``durable=`` argument decides (W17).
        """
        await self._on_this_loop()
        durable = await self._retrying("setup", _settings.fsyncs, self._client, idempotent=True)
        evicts = await self._retrying("setup", _settings.evicting, self._client, idempotent=True)
        wanted = self._durable_arg
        if evicts is not None and wanted is not False:  # W1, W2, W6: keys would vanish
            raise _settings.eviction_refused(evicts)
        if durable is False and wanted:
            raise ConfigurationError(
                "durable=True, but the Redis server does not run appendonly yes with "
                "appendfsync always: an acknowledged append could be lost in a crash"
            )
        durable = bool(wanted) if durable is None else durable and wanted is not False
        caps = {"shared", "push_follow"} | ({"durable"} if durable else set())
        self.capabilities = frozenset(caps)
        self.partitions = await self._retrying("setup", self._fix_partitions, idempotent=True)
        self._parts = _partitions(self.namespace, self.partitions)
        await self._retrying("setup", self._load_scripts, idempotent=True)
        self._ready = True

    async def drop_namespace(self) -> None:
        """Delete every key of the namespace (``fxworld.protocol.NamespaceDropper``):
        ``SCAN`` for them (on every primary of a Cluster) and ``UNLINK`` them a page
        at a time (on a Cluster, per slot). The scripts stay: namespaces share them.
        A scan visits the whole keyspace, so it takes longer on a bigger server."""
        await self._on_this_loop()
        for pattern in _scripts.namespace_patterns(self.namespace):
            try:
                async for keys in _pages(self._client.scan_iter(match=pattern, count=1000)):
                    unlink = self._client.unlink
                    await self._retrying("drop_namespace", unlink, *keys, idempotent=True)
            except Exception as e:
                raise _errors.translate(e, what="drop_namespace", url=self._url) from None
        self._ready = False  # as if new: the next call sets the namespace up again

    async def close(self) -> None:
        """Close the client if this world made it (an application's is left open);
        followers still waiting raise ``BackendUnavailable``."""
        if self._closed:
            return
        self._closed = True
        if self._loop is not asyncio.get_running_loop():
            return  # never used, or used on another loop: nothing of it runs here
        await self._waits.close(BackendUnavailable(f"follow: {self!r} was closed"))
        if self._owns_client:
            try:
                await self._client.aclose()
            except Exception:  # best effort: the server may be gone
                pass

    # -- append-with-fence ------------------------------------------------------------

    async def acquire(self, session_id: str) -> Fence:
        validate.session_id(session_id)
        k = await self._keys(session_id)
        epoch, seq = await self._script(
            "acquire", [k.meta(session_id), k.log(session_id), k.epochs, k.sessions], [session_id]
        )
        return Fence(session_id, int(epoch), int(seq))

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
        _, encoded = validate.append(
            session_id,
            entries,
            fence=fence,
            expect=expect,
            key=key,
            wake=wake,
            max_bytes=self.max_entry_bytes,
        )
        k = await self._keys(session_id)
        keys = [k.meta(session_id), k.log(session_id), k.sessions]
        head = (
            f"{'' if fence is None else fence.epoch},{'' if expect is None else expect},"
            f"{'' if wake is None else _micros(wake)},{session_id},"
        ).encode()
        if key is not None:
            keys.append(k.keys(session_id))
            head += key.encode("utf-8", "surrogatepass")
        if wake is not None:
            keys += [k.wake(session_id), k.due]
        args = [head]
        for kind, data in encoded:  # bytes, each value copied once (the packer's is next)
            args += (kind.encode("utf-8", "surrogatepass"), data.encode())
        del encoded, kind, data  # the text of a large value is not held while it is sent
        status, seq = await self._script(
            "append",
            keys,
            args,
            idempotent=key is not None,  # W6: a keyed repeat lands once
        )
        if status == _scripts.FENCED:
            assert fence is not None
            raise Fenced(session_id, fence.epoch, int(seq) or None)
        if status == _scripts.CONFLICT:
            assert expect is not None
            raise Conflict(session_id, expect, int(seq))
        return int(seq)

    # -- read-from-cursor ---------------------------------------------------------------

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        validate.session_id(session_id)
        validate.read_args(after, limit)
        log = (await self._keys(session_id)).log(session_id)
        # one XRANGE, not a script, which copies its reply through Lua: three times
        # the server's time for a large value (docs/large-values.md)
        rows = await self._command(
            "read", "XRANGE", log, f"{after + 1}-0", "+", "COUNT", str(limit)
        )
        return [_scripts.entry_of(session_id, row) for row in rows]

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Entry]:
        validate.session_id(session_id)
        validate.read_args(after, 1)
        return self._follow(session_id, after)

    async def _follow(self, session_id: str, after: int) -> AsyncIterator[Entry]:
        """W10: read what is there, then wait until the log grows past the cursor
        (pushed: the followers of a partition share one ``XREAD``, which the server
        answers as the appending script ends; see ``_follow``)."""
        cursor = after
        log = (await self._keys(session_id)).log(session_id)
        group = _scripts.partition_of(session_id, self.partitions) if self.cluster else 0
        while True:
            batch = await self.read(session_id, cursor)
            for entry in batch:
                cursor = entry.seq
                yield entry
            if not batch:
                await self._waits.wait(group, log, cursor)

    async def _xread(self, streams: list[str], ids: list[str]) -> Any:
        """One ``XREAD`` for the followers of a group: the first new entry of each
        stream past its id, or nothing after ``_FOLLOW_BLOCK_MS``."""

        async def xread(block_ms: int) -> Any:
            block = str(block_ms)
            return await self._command(
                "follow", "XREAD", "COUNT", "1", "BLOCK", block, "STREAMS", *streams, *ids
            )

        if self._budget is None:  # one server: one XREAD, in the blocking pool
            return await xread(_FOLLOW_BLOCK_MS)
        return await self._budget.xread(xread, _FOLLOW_BLOCK_MS)  # W10: writers keep a share

    # -- enqueue-wake ------------------------------------------------------------------

    async def wake(self, session_id: str, *, delay: float = 0.0) -> None:
        validate.session_id(session_id)
        seconds = validate.delay(delay)
        k = await self._keys(session_id)
        await self._script(
            "wake",
            [k.wake(session_id), k.due],
            [session_id, str(_micros(seconds))],
            idempotent=True,  # W11: a repeated request coalesces with itself
        )

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        taken = await self.take_wakes(lease=lease, limit=1)
        return taken[0] if taken else None

    async def take_wakes(self, *, lease: float, limit: int = 10) -> list[WakeLease]:
        """Up to ``limit`` due wakes, each leased (W12): earliest first over every partition
        and agent's queue (``WakeBatcher``; one script on one server; ``_take``)."""
        micros = str(_micros(validate.lease(lease)))
        limit = validate.wake_batch(limit)  # W15
        await self._ensure_ready()
        return await self._takes.take(self._parts, micros, limit, "")

    # -- AgentRouter (W19): the owner in the session's meta, a due queue per agent --------

    async def claim(self, session_id: str, agent: str) -> str:
        """W19: ``agent`` becomes the owner unless one is recorded (set-if-absent), and a
        queued wake moves to its queue: one script, safe to send again."""
        validate.session_id(session_id)
        validate.agent_name(agent)  # W15: before any I/O
        k = await self._keys(session_id)
        keys = [k.meta(session_id), k.due, k.agents]
        return text(await self._script("claim", keys, [session_id, agent], idempotent=True))

    async def owner(self, session_id: str) -> str | None:
        validate.session_id(session_id)
        meta = (await self._keys(session_id)).meta(session_id)
        found = await self._script("owner", [meta], [], idempotent=True)
        return None if found is None else text(found)

    async def rename_agent(self, old: str, new: str) -> int:
        """Give every session of agent ``old`` to ``new`` (``_rename``); how many moved."""
        old, new = validate.agent_name(old), validate.agent_name(new)
        await self._ensure_ready()  # the client of this event loop
        return await _rename.rename_agent(self._client, self._script, self.namespace, old, new)

    async def take_wakes_for(self, agent: str, *, lease: float, limit: int = 10) -> list[WakeLease]:
        """``take_wakes`` over the shared queues and ``agent``'s own only (W19):
        another agent's wakes are neither visited nor handed out, however many
        are due."""
        validate.agent_name(agent)
        micros = str(_micros(validate.lease(lease)))
        limit = validate.wake_batch(limit)  # W15
        await self._ensure_ready()
        return await self._takes.take(self._parts, micros, limit, agent)

    async def renew_wake(self, wake: WakeLease, *, lease: float) -> WakeLease:
        micros = _micros(validate.lease(lease))
        validate.held(wake)
        k = await self._keys(wake.session_id)
        status, until = await self._script(
            "renew",
            [k.wake(wake.session_id), k.due],
            [wake.session_id, wake.token, str(micros)],
            idempotent=True,  # W12: renewing twice holds the lease as renewing once
        )
        if status == _scripts.LOST:
            raise _lease_lost(wake)
        return WakeLease(wake.session_id, wake.token, wake.attempt, _scripts.time_of(until))

    async def finish_wake(self, wake: WakeLease) -> None:
        validate.held(wake)
        k = await self._keys(wake.session_id)
        status = await self._script(
            "finish", [k.wake(wake.session_id), k.due], [wake.session_id, wake.token]
        )
        if status == _scripts.LOST:
            raise _lease_lost(wake)

    # -- lifecycle of sessions ----------------------------------------------------------

    async def delete(self, session_id: str) -> None:
        validate.session_id(session_id)
        keys = (await self._keys(session_id)).session(session_id)
        await self._script("delete", keys, [session_id], idempotent=True)

    async def last_entry(self, session_id: str) -> Entry | None:
        """The log's last entry, or ``None``: one ``XREVRANGE`` (not in a script, as
        ``read``) (``fxworld.protocol.LastEntryReader``)."""
        validate.session_id(session_id)
        log = (await self._keys(session_id)).log(session_id)
        rows = await self._command("last_entry", "XREVRANGE", log, "+", "-", "COUNT", "1")
        return _scripts.entry_of(session_id, rows[0]) if rows else None

    async def delete_if_idle(self, session_id: str, *, last: int) -> bool:
        """``delete`` only if the log still ends at ``last`` and no wake is pending
        (``fxworld.protocol.IdleDeleter``): one script. Not resent once sent (a
        resend would find the log gone and answer ``False`` for a delete done)."""
        validate.session_id(session_id)
        last = validate.last_seq(last)
        keys = (await self._keys(session_id)).session(session_id)
        done = await self._script("delete_if_idle", keys, [session_id, str(last)])
        return bool(int(done))

    async def list_sessions(self, *, after: str = "", limit: int = 100) -> list[str]:
        """Ids of sessions with a non-empty log, ascending, greater than ``after``
        (one script on one server; one per partition, at once, on a Cluster)."""
        validate.list_args(after, limit)
        await self._ensure_ready()
        lists = [k.sessions for k in self._parts]
        args: list[str | bytes] = [after, str(min(limit, validate.MAX_SEQ))]
        if not self.cluster:
            found = await self._script("sessions", lists, args, idempotent=True)
        else:
            parts = await asyncio.gather(
                *(self._script("sessions", [key], args, idempotent=True) for key in lists)
            )
            found = [sid for part in parts for sid in part]
        return sorted(text(sid) for sid in found)[:limit]

    # -- WakeLister: read-only, takes nothing (W11-W13 untouched) --------------------------

    async def wake_state(self, session_id: str) -> WakeState | None:
        validate.session_id(session_id)
        keys = await self._keys(session_id)
        found = [w for w in await self._wake_states([keys.due]) if w.session_id == session_id]
        return found[0] if found else None

    async def list_wakes(self, *, after: str = "", limit: int = 100) -> list[WakeState]:
        """Pending wakes by session id; reads every pending wake of the namespace
        (one script on one server; one per partition, at once, on a Cluster), then
        pages here: a cost in the number of pending wakes, not of sessions."""
        validate.list_args(after, limit)
        await self._ensure_ready()
        queues = [k.due for k in self._parts]
        states = await self._wake_states(queues)
        return sorted((w for w in states if w.session_id > after), key=_by_id)[:limit]

    async def _wake_states(self, queues: list[str]) -> list[WakeState]:
        groups = [queues] if not self.cluster else [[q] for q in queues]
        replies = await asyncio.gather(
            *(self._script("wakes", group, [], idempotent=True) for group in groups)
        )
        return [state for reply in replies for state in _wake_states(reply)]

    # -- the one way to the server -------------------------------------------------------

    async def _keys(self, session_id: str) -> Keys:
        """The keys of the session's partition, of the count that setup() fixed."""
        if not self._ready:
            await self._ensure_ready()
        return self._parts[_scripts.partition_of(session_id, self.partitions)]

    async def _script(
        self,
        name: str,
        keys: Sequence[str],
        args: Sequence[str | bytes],
        *,
        idempotent: bool = False,
    ) -> Any:
        """Run script ``name``: one ``EVALSHA``, one round trip. A script the server
        lost (restart, failover, ``SCRIPT FLUSH``) is loaded again and run again."""
        if not self._ready or self._loop is not asyncio.get_running_loop():
            await self._ensure_ready()
        # all bytes: redis-py's packer encodes each other value in a Python call
        command = (
            "EVALSHA",
            self._sha[name],
            b"%d" % len(keys),
            *[k.encode() for k in keys],
            *[a if isinstance(a, bytes) else a.encode("utf-8", "surrogatepass") for a in args],
        )
        reloads = 0
        while True:
            try:
                return await self._retrying(
                    name, self._client.execute_command, *command, idempotent=idempotent
                )
            except _NoScript:
                reloads += 1
                if reloads > _RELOADS:
                    raise ConfigurationError(
                        f"{name}: the Redis server keeps losing fxworld's scripts"
                    ) from None
                await self._retrying(name, self._load_scripts, idempotent=True)

    async def _command(self, what: str, *args: str) -> Any:
        """One plain command that is safe to repeat (``XRANGE``, ``XREVRANGE``,
        ``XREAD``)."""
        await self._ensure_ready()
        return await self._retrying(what, self._client.execute_command, *args, idempotent=True)

    async def _retrying(self, what: str, call: Any, *args: Any, idempotent: bool) -> Any:
        """Await ``call(*args)`` within ``_CALL_TIMEOUT``, running it again while
        ``_errors.retry_safe`` allows, then translate what is left (W16)."""
        attempt = 0
        while True:
            try:
                if self._budget is None:  # one server: the blocking pool waits
                    return await self._deadlines.run(call, *args)
                return await self._budget.call(lambda: self._deadlines.run(call, *args))
            except Exception as e:
                if _errors.needs_reload(e):
                    raise _NoScript() from None
                sent = not _errors.never_sent(e)
                if _errors.tls_unanswered(e, self._url):  # fail within the connect timeout
                    raise _errors.translate(e, what=what, url=self._url) from None
                if attempt < len(_BACKOFF) and _errors.retry_safe(
                    e, sent=sent, idempotent=idempotent
                ):
                    await asyncio.sleep(_BACKOFF[attempt])
                    attempt += 1
                    continue
                raise _errors.translate(e, what=what, url=self._url) from None

    async def _ensure_ready(self) -> None:
        if self._loop is not asyncio.get_running_loop():
            await self._on_this_loop()
        if self._ready:
            return
        if self._ready_lock is None:
            self._ready_lock = asyncio.Lock()
        async with self._ready_lock:
            if not self._ready:  # a world used without setup(): set it up once
                await self.setup()

    async def _on_this_loop(self) -> None:
        """Connections belong to the event loop that opened them: used from a new
        loop (a second ``asyncio.run``), a world that made its client makes a new one."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        if self._loop is not None and self._owns_client:
            self._client = self._make()
        self._ready_lock = None
        self._takes = Takes(self._script, self.cluster)
        self._deadlines = Deadlines(_CALL_TIMEOUT)
        self._waits = Waits(self._xread)
        self._budget = Budget(self.connection_budget) if self.cluster else None
        self._loop = loop

    async def _fix_partitions(self) -> int:
        key = _scripts.config_key(self.namespace)
        await self._client.hsetnx(key, "partitions", str(self.partitions))
        await self._client.hsetnx(key, "version", str(_scripts.VERSION))
        stored = int(text(await self._client.hget(key, "partitions")))
        asked = self._asked_partitions
        if asked is not None and asked != stored:
            raise ConfigurationError(
                f"namespace {self.namespace!r} was set up with {stored} wake partitions; "
                f"this world was opened with partitions={asked}. Open it with "
                f"partitions={stored} (or none), or use a new namespace"
            )
        return stored

    async def _load_scripts(self) -> None:
        for name, script in _SCRIPTS.items():
            sha = await self._client.script_load(script)
            if isinstance(sha, dict):  # a Cluster answers per primary
                sha = next(iter(sha.values()))
            assert text(sha) == self._sha[name].decode(), "the server hashed a script differently"


_SCRIPTS = _scripts.SCRIPTS


class _NoScript(Exception):
    """The server does not hold the script (raised inside ``_retrying``)."""


# -- helpers ---------------------------------------------------------------------------


async def _pages(keys: AsyncIterator[Any], size: int = 500) -> AsyncIterator[list[Any]]:
    """``keys`` in lists of at most ``size``."""
    page: list[Any] = []
    async for key in keys:
        page.append(key)
        if len(page) >= size:
            yield page
            page = []
    if page:
        yield page


def _sha1(script: str) -> bytes:
    return hashlib.sha1(script.encode()).hexdigest().encode()


def _partitions(namespace: str, count: int) -> list[Keys]:
    return [Keys.of(namespace, p) for p in range(count)]


def _client_factory(url: str, cluster: bool, budget: int) -> Any:
    """A function that builds this world's own client: redis-py's automatic resend
    off (the world decides what may run again), bounded timeouts."""
    options: dict[str, Any] = {
        "client_name": f"fxworld-{os.getpid()}",  # CLIENT LIST shows whose it is
        "retry": Retry(NoBackoff(), 0),
        "socket_timeout": None,  # each call's deadline is _CALL_TIMEOUT (cheaper)
        "socket_connect_timeout": 5.0,
    }
    try:  # newer redis-py: off, so that the pool checks an idle connection before using
        # it (one the server closed meanwhile is replaced before the script is sent)
        from redis.maint_notifications import MaintNotificationsConfig

        options["maint_notifications_config"] = MaintNotificationsConfig(enabled=False)
    except ImportError:  # older redis-py always checks
        pass
    options["max_connections"] = budget  # per node on a Cluster (the world waits)
    if cluster:
        return lambda: RedisCluster.from_url(url, **options)
    return lambda: _budgeted(url, options)


def _budgeted(url: str, options: dict[str, Any]) -> Redis:
    """A client whose calls wait for one of at most ``budget`` connections."""
    pool = BlockingConnectionPool.from_url(url, **{"timeout": _CALL_TIMEOUT, **options})
    client = Redis(connection_pool=pool)
    client.auto_close_connection_pool = True  # close() closes the pool it made
    return client


def _budget_of(url: str) -> int:
    """``?max_connections=`` (kept in the URL for redis-py), or ``POOL_SIZE``."""
    value = split_query(url)[1].get("max_connections", str(POOL_SIZE))
    if not value.isdigit() or int(value) < 2:
        raise ConfigurationError(
            f"max_connections must be an integer of at least 2 (the followers' XREAD "
            f"takes one, calls need another) in {mask(url)}"
        )
    return int(value)


def _given_budget(client: Redis | RedisCluster) -> int:
    """The connections per server (per node) an application's client allows."""
    if isinstance(client, RedisCluster):
        return int(client.nodes_manager.connection_kwargs.get("max_connections") or 100)
    return int(getattr(client.connection_pool, "max_connections", 0) or 2**31)


def _check_no_resend(client: Redis | RedisCluster) -> None:
    retry = client.retry if isinstance(client, RedisCluster) else client.get_retry()
    if retry is not None and retry.get_retries() > 0:
        raise ConfigurationError(
            "RedisWorld needs a client made with retry=Retry(NoBackoff(), 0): redis-py "
            "resends a command whose connection broke, which could land a fenced append "
            "twice; the world itself retries what is safe to repeat"
        )


def _own_options(url: str) -> tuple[str, dict[str, str]]:
    """Split fxworld's options off ``url``; the rest stays for redis-py."""
    scheme = parse(url).scheme.lower()  # host and port checked: redis-py's ValueError
    if scheme not in _SCHEMES:
        raise ConfigurationError(
            f"RedisWorld takes redis:// or rediss:// URLs, not {scheme or '?'}:// ({mask(url)})"
        )
    base, params = split_query(url)
    own = {k: params.pop(k) for k in _OWN_OPTIONS if k in params}
    for name in ("max_entry_bytes", "partitions"):
        if name in own and not own[name].isdigit():
            raise ConfigurationError(f"{name} must be an integer in {mask(url)}")
    if params:
        base += "?" + urlencode(params)
    return base, own


def _flag(value: str, name: str, url: str) -> bool:
    lowered = value.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ConfigurationError(f"{name} must be true or false in {mask(url)}")


def _micros(seconds: float) -> int:
    """Seconds as whole microseconds, rounded up: a wake is never due early (W11)."""
    whole = int(seconds * _US)
    return whole if whole >= seconds * _US else whole + 1


def _by_id(state: WakeState) -> str:
    return state.session_id


def _wake_states(reply: list[Any]) -> list[WakeState]:
    """The ``wakes`` script's reply as states: due is the pending request's time,
    else (taken, no request since) the lease's end, when it is delivered again
    (W12); a lease that ran out holds nothing."""
    now = int(text(reply[0]))
    out = []
    for i in range(1, len(reply), 4):
        sid, due, until, attempt = (text(x) for x in reply[i : i + 4])
        leased = _scripts.time_of(until) if until and int(until) > now else None
        out.append(WakeState(sid, _scripts.time_of(due or until or now), leased, int(attempt)))
    return out


def _lease_lost(wake: WakeLease) -> LeaseLost:
    return LeaseLost(f"session {wake.session_id!r}: the lease is no longer held")
