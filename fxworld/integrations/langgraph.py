"""``WorldSaver``: a LangGraph checkpointer on any World (extra ``fxworld[langgraph]``).

One LangGraph thread is one fxworld session, ``lg.`` followed by 40 hex digits of
the SHA-256 of its ``thread_id`` (session ids are limited to
``[A-Za-z0-9._:-]{1,128}``, W15; a thread id is any string). Every namespace of the
thread (subgraphs) lives in that one log, so deleting, copying or pruning a thread
is one operation on one session, and one fence covers the thread and its subgraphs.
Its entries are those of :mod:`~fxworld.integrations.langgraph_log` (see
:data:`KINDS`): one ``lg.checkpoint`` per checkpoint, without its channel values;
one ``lg.blob`` per channel value and version, written once, in the append of the
first checkpoint that holds it (:mod:`~fxworld.integrations.langgraph_values`: a
superstep writes what changed, not the whole state); one ``lg.writes`` per
``put_writes`` call. A task's writes go in the
same append as the next checkpoint when it follows them at once, as in a
superstep (:mod:`~fxworld.integrations.langgraph_batching`): one append, one
commit per superstep. Values are encoded by the
saver's ``serde`` (LangGraph's ``JsonPlusSerializer`` by default), base64 in the
entry's JSON. A thread written before values were kept apart (each checkpoint
whole) reads and resumes as it is: its next checkpoint writes every value once,
and refers back from then on.

**One writer per run.** A run of a graph takes the thread over when it starts
(:meth:`World.acquire`, W1) and appends every checkpoint and write with its own
fence (W2): once another run has started on the thread, in this saver or any
other, in this process or another, the earlier run's writes raise
:class:`ThreadTakenOver` and write nothing, so the chain never forks silently. A
write outside a run (``update_state``, ``bulk_update_state``) is an edit: it takes
the thread over again if a run did since, so any replica can edit a thread that
is not being run (:mod:`~fxworld.integrations.langgraph_fences`, which also says
how a run is recognised: LangGraph has no public API for it). Running again from
an older checkpoint that the caller names (time travel) is a run like any other:
it takes the thread over and branches from that checkpoint, as LangGraph documents.

**What the reads cost** (``n`` = entries of the thread's log, ``k`` = entries
after the checkpoint asked for; a page is one ``read``, see
:mod:`fxworld.logends`):

- ``get_tuple`` of the latest checkpoint: one request for the log's end, then one
  page back from it (a checkpoint and its writes fit in the first page): O(1)
  requests, whatever the length of the thread. Of a named checkpoint: the pages
  back to it, O(k). Of a thread with no checkpoint yet: 2 requests more (a look
  for what a compaction may have staged).
- ``list`` of one thread (``before``, ``limit``, ``filter``): pages back from the
  end until ``limit`` checkpoints matched: never another thread. Without
  ``thread_id`` it reads every LangGraph thread of the world (there is no index).
- ``delete_thread``: two ``delete`` (the thread's and its staging session's,
  W14). ``copy_thread``: reads the source once and appends its live checkpoints,
  each followed by its writes, in batches. ``prune(strategy="keep_latest")`` and
  ``delete_for_runs``: free the storage of what they remove by compacting each
  thread concerned (:mod:`~fxworld.integrations.langgraph_compaction`: one read of
  the thread, then 12 requests), never one being written (written less than
  ``quiet`` seconds ago: what they remove is hidden, without taking the thread's
  fence, and a later compaction frees it); ``delete_for_runs`` has
  no thread, so it reads every thread, and compacts those that hold a checkpoint
  of the runs.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import inspect
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

import fxworld
from fxworld.errors import ConfigurationError, Fenced
from fxworld.logends import window
from fxworld.protocol import SessionLister, World
from fxworld.types import Entry, NewEntry

from .langgraph_batching import ThreadAppends
from .langgraph_compaction import (
    Choose,
    compact,
    delete_thread,
    newest_first,
    normalized,
    thread_entries,
)
from .langgraph_fences import Fences, run_of
from .langgraph_log import (
    CHECKPOINT,
    KINDS,
    PREFIX,
    WRITES,
    ThreadScan,
    is_thread_session,
    thread_session,
)
from .langgraph_migration import copy_threads, next_version
from .langgraph_values import Placed, blobs_of, placed, stored
from .loops import LoopOwner

__all__ = ["WorldSaver", "ThreadTakenOver", "copy_threads", "thread_session", "KINDS", "PREFIX"]

_KNOWN = 1000
"""Checkpoints a saver remembers as being in the log (to tell early writes)."""

_COPY_BATCH = 100
"""Entries per append when copying a thread."""

_ASYNC_INSTEAD = "use the async methods (ainvoke, astream, aget_state)"

T = TypeVar("T")


class ThreadTakenOver(Fenced):
    """Another process started running this thread: this process must stop.

    Raised by a write of a run whose thread was taken over since the run started
    (W2), or deleted or compacted by a prune (W14). Nothing of the refused call
    was written; the thread's chain continues from the other process's checkpoints.
    """

    def __init__(self, thread_id: str, refused: Fenced) -> None:
        super().__init__(refused.session_id, refused.epoch, refused.current)
        self.thread_id = thread_id
        self.args = (
            f"thread {thread_id!r} was taken over by another run, or deleted or "
            f"compacted by a prune, since this run started (fence epoch {refused.epoch} "
            "is stale); this run must stop, nothing was written",
        )


class WorldSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer that keeps every thread in a World.

    ``world``: any World; ``None`` means :func:`fxworld.world` (``FXWORLD_URL``, else
    the embedded SQLite world). ``serde``: LangGraph's serializer protocol (default
    ``JsonPlusSerializer``). ``quiet``: seconds a thread must have gone unwritten
    before ``prune``/``delete_for_runs`` compact it (younger: it is being written,
    and what they remove is hidden instead, freed by a later compaction). The world
    is set up on first use.

    One saver, any loop (:mod:`~fxworld.integrations.loops`): async methods run on
    the caller's loop (the first one to use the saver owns the world's connections;
    another running loop's calls are handed to it, and once the owner is closed,
    as after an ``asyncio.run``, the next caller's loop takes over). Sync methods
    (``graph.invoke``) run on the owner from another thread, or on a loop of the
    saver's own when none runs; from inside the owning loop they raise, as they
    would deadlock. :meth:`aclose` (``close``) closes the world.
    """

    def __init__(
        self,
        world: World | None = None,
        *,
        serde: SerializerProtocol | None = None,
        quiet: float = 300.0,
    ):
        super().__init__(serde=serde)
        self.quiet = quiet
        self.world: World = world if world is not None else fxworld.world()
        self._fences = Fences(self.world.acquire)
        self._known: dict[tuple[str, str, str], None] = {}
        self._places: dict[tuple[str, str, str], Placed] = {}
        self._early: dict[tuple[str, str, str], int] = {}
        self._putting: dict[tuple[str, str, str], asyncio.Future[None]] = {}
        self._writing: dict[tuple[str, str, str], set[asyncio.Future[None]]] = {}
        self._ready = False
        self._loops = LoopOwner("WorldSaver", self._moved)
        self._appends = ThreadAppends(self.world, self._fences.fence, ThreadTakenOver)

    def get_next_version(self, current: Any, channel: None) -> Any:
        """Integers (1, 2, ...) on a thread started here; on a thread copied from a
        saver that numbers versions with strings (the incumbents), the next string of
        that scheme, so that copied threads run on (see
        :mod:`~fxworld.integrations.langgraph_migration`)."""
        return next_version(current)

    # -- plumbing ------------------------------------------------------------

    async def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop that owns the world (:mod:`.loops`)."""
        return await self._loops.run(self._set_up(coro))

    def _sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` to completion from synchronous code."""
        try:
            return self._loops.run_sync(self._set_up(coro), instead=_ASYNC_INSTEAD)
        finally:
            if inspect.getcoroutinestate(coro) == inspect.CORO_CREATED:
                coro.close()  # refused before it ran

    async def _set_up(self, coro: Coroutine[Any, Any, T]) -> T:
        if not self._ready:
            await self.world.setup()
            self._ready = True
        return await coro

    def _moved(self) -> None:
        """The world moved to another event loop: what was kept of the old one goes."""
        self._putting.clear()
        self._writing.clear()
        self._appends = ThreadAppends(self.world, self._fences.fence, ThreadTakenOver)

    async def aclose(self) -> None:
        """Close the world (its connections) and stop the saver's own event loop, if
        it started one: once, when the program is done with the saver (a world
        shared with other objects is closed for them too)."""
        try:
            await self._loops.run(self.world.close())
        finally:
            self._loops.close()

    def close(self) -> None:
        """:meth:`aclose` from synchronous code."""
        try:
            self._loops.run_sync(self.world.close())
        finally:
            self._loops.close()

    def _encode(self, value: Any) -> list[str]:
        kind, raw = self.serde.dumps_typed(value)
        return [kind, base64.b64encode(raw).decode("ascii")]

    def _decode(self, pair: Sequence[str]) -> Any:
        return self.serde.loads_typed((pair[0], base64.b64decode(pair[1])))

    async def _start(self, sid: str, config: RunnableConfig) -> None:
        """A run's first read takes the thread over (W1), before it reads: from then
        on, the fence of any earlier run, in any process, is refused (W2). A read
        outside a run (``get_state``) or in a subgraph takes nothing
        (:mod:`~fxworld.integrations.langgraph_fences`)."""
        run = run_of(config)
        if run is None or config.get("configurable", {}).get("checkpoint_ns"):
            return
        if not self._fences.started(sid, run):
            await self._fences.start(sid, run)

    def _know(self, cp: tuple[str, str, str]) -> None:
        """Note a checkpoint that is in the log (put or read here); the latest
        :data:`_KNOWN` are kept."""
        self._known[cp] = None
        if len(self._known) > _KNOWN:
            del self._known[next(iter(self._known))]

    async def _append(
        self, config: RunnableConfig, entries: list[NewEntry], key: str, *, linger: bool = False
    ) -> int:
        """Append ``entries`` with the fence of the run that ``config`` is of (W2),
        joined with the run's other appends to the thread that meet them
        (:mod:`~fxworld.integrations.langgraph_batching`); the seq of the last."""
        thread_id = str(config["configurable"]["thread_id"])
        return await self._appends.append(
            thread_session(thread_id), thread_id, entries, key, run=run_of(config), linger=linger
        )

    # -- reads ---------------------------------------------------------------

    async def _tuple(self, thread_id: str, entry: Entry, thread: ThreadScan) -> CheckpointTuple:
        data = entry.data
        sid = thread_session(thread_id)
        self._know((thread_id, data["ns"], data["id"]))
        if "early" in data:  # its writes that landed before it (see _put_writes)
            earlier = await window(self.world, sid, data["early"] - 1, entry.seq - 1)
            for before in reversed(earlier):  # newest first, as a backwards scan sees them
                if before.kind == WRITES and before.data["checkpoint"] == data["id"]:
                    thread.see(before)
        ns, cid = data["ns"], data["id"]
        checkpoint = self._decode(data["checkpoint"])
        if "values" in data:  # kept apart (langgraph_values); else held inline
            blobs = await blobs_of(self.world, sid, entry, thread.blobs)
            checkpoint["channel_values"].update(
                (ch, self._decode(blob.data["value"])) for ch, blob in blobs.items()
            )
            self._placed(
                (thread_id, ns, cid),
                {ch: (blob.data["version"], blob.seq) for ch, blob in blobs.items()},
            )
        conf = {"thread_id": thread_id, "checkpoint_ns": ns}
        parent = data["parent"]
        return CheckpointTuple(
            config={"configurable": {**conf, "checkpoint_id": cid}},
            checkpoint=checkpoint,
            metadata=self._decode(data["metadata"]),
            parent_config={"configurable": {**conf, "checkpoint_id": parent}} if parent else None,
            pending_writes=self._pending(thread.writes.get((ns, cid), [])),
        )

    def _placed(self, cp: tuple[str, str, str], where: Placed) -> None:
        """Note where the values of a checkpoint are (read or put here); the
        latest :data:`_KNOWN` are kept."""
        self._places.pop(cp, None)
        self._places[cp] = where
        if len(self._places) > _KNOWN:
            del self._places[next(iter(self._places))]

    def _pending(self, newest_first: list[Entry]) -> list[PendingWrite]:
        """A checkpoint's writes as ``put_writes`` left them: a regular write once per
        (task, index), the first kept; a special one (error, interrupt...) the last."""
        kept: dict[tuple[str, int], tuple[str, str, str, list[str]]] = {}
        for entry in reversed(newest_first):
            task, path = entry.data["task"], entry.data["path"]
            for idx, channel, kind, raw in entry.data["writes"]:
                if idx < 0 or (task, idx) not in kept:
                    kept[(task, idx)] = (path, task, channel, [kind, raw])
        order = sorted(kept, key=lambda k: (kept[k][0], k[0], k[1]))  # writes_sort_key
        return [(kept[k][1], kept[k][2], self._decode(kept[k][3])) for k in order]

    async def _find(self, config: RunnableConfig) -> CheckpointTuple | None:
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        sid = thread_session(thread_id)
        await self._start(sid, config)
        ns, cid = conf.get("checkpoint_ns", ""), get_checkpoint_id(config)
        thread = ThreadScan()
        async for entry in newest_first(self.world, sid, thread.blobs):
            thread.see(entry)
            data = entry.data
            if entry.kind == CHECKPOINT and data["ns"] == ns and cid in (None, data["id"]):
                if thread.live(entry):
                    return await self._tuple(thread_id, entry, thread)
                if cid is not None:
                    return None
        return None

    async def _thread_list(
        self,
        thread_id: str,
        ns: str | None,
        before: str | None,
        match: dict[str, Any],
        cid: str | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        thread = ThreadScan()
        async for entry in newest_first(self.world, thread_session(thread_id), thread.blobs):
            thread.see(entry)
            if not thread.live(entry) or ns not in (None, entry.data["ns"]):
                continue
            if cid is not None and entry.data["id"] != cid:
                continue
            if before is not None and entry.data["id"] >= before:
                continue
            if match:  # the metadata alone tells: no value is read for a checkpoint left out
                metadata = self._decode(entry.data["metadata"])
                if not all(metadata.get(k) == v for k, v in match.items()):
                    continue
            yield await self._tuple(thread_id, entry, thread)

    async def _threads(self) -> AsyncIterator[str]:
        """Every LangGraph thread id in the world (read from its first checkpoint)."""
        lister = self.world
        if not isinstance(lister, SessionLister):
            raise ConfigurationError(
                f"{type(lister).__name__} cannot list its sessions (SessionLister): "
                "list() without a thread_id and delete_for_runs() need it"
            )
        after, listed = PREFIX, ""
        while page := await lister.list_sessions(after=after, limit=100):
            for sid in page:
                if not sid.startswith(PREFIX):
                    return
                if not is_thread_session(sid):  # a compaction's staging session
                    sid = sid[: len(thread_session(""))]  # its thread's
                    await thread_entries(self.world, sid)  # written back, or stale: gone
                    if sid == listed:
                        continue  # listed as itself
                listed = sid
                thread = await self._thread_of(sid)
                if thread is not None:
                    yield thread
            after = page[-1]

    async def _thread_of(self, sid: str) -> str | None:
        """The thread id of ``sid``, read from its first checkpoint, however many
        entries (fences of runs that wrote nothing) come before it."""
        after = 0
        while page := await self.world.read(sid, after, limit=100):
            for entry in page:
                if entry.kind == CHECKPOINT:
                    return str(entry.data["thread"])
            after = page[-1].seq
        return None

    async def _list(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> list[CheckpointTuple]:
        conf = (config or {}).get("configurable", {})
        before_id = get_checkpoint_id(before) if before else None
        if "thread_id" in conf:
            threads: AsyncIterator[str] = _one(str(conf["thread_id"]))
        else:
            threads = self._threads()
        found: list[CheckpointTuple] = []
        cid = conf.get("checkpoint_id")  # that checkpoint only, as LangGraph's savers
        async for thread_id in threads:
            ns = conf.get("checkpoint_ns")
            async for tup in self._thread_list(thread_id, ns, before_id, filter or {}, cid):
                if limit is not None and len(found) >= limit:
                    return found
                found.append(tup)
        return found

    # -- writes --------------------------------------------------------------

    async def _put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> RunnableConfig:
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), conf.get("checkpoint_ns", "")
        parent = conf.get("checkpoint_id")
        # Only a run refers back to values it read or wrote (see langgraph_values).
        known = self._places.get((thread_id, ns, parent or "")) if run_of(config) else None
        blobs, refs, bare = stored(checkpoint, ns, known, self._encode)
        data = {
            "thread": thread_id,
            "ns": ns,
            "id": checkpoint["id"],
            "parent": parent,
            "checkpoint": self._encode(bare),
            "metadata": self._encode(get_serializable_checkpoint_metadata(config, metadata)),
            "values": refs,
        }
        cp = (thread_id, ns, checkpoint["id"])
        self._putting[cp] = landed = asyncio.get_running_loop().create_future()
        try:
            # Writes of this checkpoint already under way land first: the put says
            # where the earliest of them starts (read by _tuple). A write that
            # starts from now on waits for the put instead (see _put_writes).
            for writing in list(self._writing.get(cp, ())):
                await writing
            if cp in self._early:
                data["early"] = self._early.pop(cp)
            entries = [*blobs, NewEntry(CHECKPOINT, data)]
            seq = await self._append(config, entries, _key("c", ns, checkpoint["id"]))
            self._know(cp)
            self._placed(cp, placed(refs, checkpoint["channel_versions"], seq))
        finally:
            del self._putting[cp]
            landed.set_result(None)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    async def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> None:
        conf = config["configurable"]
        ns, cid = conf.get("checkpoint_ns", ""), conf["checkpoint_id"]
        rows = [
            [WRITES_IDX_MAP.get(channel, i), channel, *self._encode(value)]
            for i, (channel, value) in enumerate(writes)
        ]
        data = {"ns": ns, "checkpoint": cid, "task": task_id, "path": task_path, "writes": rows}
        special = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        # A regular write lands once per (task, index) (W6); a special one replaces.
        key = _key("s" if special else "w", ns, cid, task_id, *(str(r[0]) for r in rows))
        if special:
            key += ":" + hashlib.sha256(repr(rows).encode()).hexdigest()[:16]
        cp = (str(conf["thread_id"]), ns, cid)
        # LangGraph ("async" durability) may save a task's writes while it puts their
        # checkpoint, or before. A write that finds the put under way lands after it;
        # one that starts first is waited for by the put, which then says where its
        # early writes start (read by _tuple). Nothing is awaited between the check
        # and the registration, so every write is one or the other.
        if cp in self._putting:
            await self._putting[cp]
        if cp in self._known:  # may wait a moment for the next checkpoint, to go with it
            await self._append(config, [NewEntry(WRITES, data)], key, linger=True)
            return
        landed = asyncio.get_running_loop().create_future()
        self._writing.setdefault(cp, set()).add(landed)
        try:
            seq = await self._append(config, [NewEntry(WRITES, data)], key)
            if cp not in self._known:
                self._early[cp] = min(seq, self._early.get(cp, seq))
                if len(self._early) > _KNOWN:  # writes whose checkpoint never came
                    del self._early[next(iter(self._early))]
        finally:
            writing = self._writing[cp]
            writing.discard(landed)
            if not writing:
                del self._writing[cp]
            landed.set_result(None)

    async def _compact(self, sid: str, choose: Choose) -> None:
        """Free the storage of the checkpoints ``choose`` names (see
        :mod:`~fxworld.integrations.langgraph_compaction`); a fence this saver took
        outside a run is stale after it (W14), so it is taken again at the next
        write."""
        if await compact(self.world, sid, choose, quiet=self.quiet):
            self._fences.forget(sid)

    def _of_runs(self, run_ids: set[str]) -> Choose:
        def choose(live: list[Entry]) -> set[tuple[str, str]]:
            return {
                (e.data["ns"], e.data["id"])
                for e in live
                if self._decode(e.data["metadata"]).get("run_id") in run_ids
            }

        return choose

    async def _delete(self, thread_id: str) -> None:
        sid = thread_session(thread_id)
        self._fences.forget(sid)
        await delete_thread(self.world, sid)  # W14

    async def _delete_for_runs(self, run_ids: Sequence[str]) -> None:
        if not run_ids:
            return
        async for thread_id in self._threads():
            await self._compact(thread_session(thread_id), self._of_runs(set(run_ids)))

    async def _copy(self, source: str, target: str) -> None:
        """Append the source's live checkpoints, each preceded by the values it
        names and followed by its writes (so no position of the source is named
        in the target), :data:`_COPY_BATCH` checkpoints per append."""
        src, dst = thread_session(source), thread_session(target)
        entries = await thread_entries(self.world, src)
        scan = ThreadScan()
        for e in entries:
            scan.see(e)
        live = [(e.data["ns"], e.data["id"]) for e in entries if scan.live(e)]
        for start in range(0, len(live), _COPY_BATCH):
            part = set(live[start : start + _COPY_BATCH])
            kept = normalized(entries, _among(scan, part))
            batch = [_retarget(e, target) for e in kept]
            await self.world.append(dst, batch, key=f"copy:{src}:{start}")  # W6: once

    async def _prune(self, thread_ids: Sequence[str], strategy: str) -> None:
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        for thread_id in thread_ids:
            sid = thread_session(thread_id)
            if strategy == "keep_latest":
                await self._compact(sid, _all_but_latest)
            elif await delete_thread(self.world, sid, idle=True):  # never one being written
                self._fences.forget(sid)

    # -- BaseCheckpointSaver: async ------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the thread's latest in its namespace."""
        return await self._on_loop(self._find(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints newest first; ``filter`` matches metadata keys exactly."""
        for tup in await self._on_loop(self._list(config, filter, before, limit)):
            yield tup

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Append the checkpoint with this run's fence (W2); ``ThreadTakenOver`` if
        another run took the thread over."""
        return await self._on_loop(self._put(config, checkpoint, metadata))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Append a task's writes to the checkpoint ``config`` names (fenced, W2)."""
        await self._on_loop(self._put_writes(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread, every namespace, checkpoints and writes (W14)."""
        await self._on_loop(self._delete(str(thread_id)))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Drop the checkpoints (and their writes) whose metadata ``run_id`` is listed."""
        await self._on_loop(self._delete_for_runs(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Append every checkpoint and write of the source to the target thread."""
        await self._on_loop(self._copy(str(source_thread_id), str(target_thread_id)))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: drop all but each namespace's latest checkpoint;
        ``delete``: delete whole threads, never one being written."""
        await self._on_loop(self._prune([str(t) for t in thread_ids], strategy))

    # -- BaseCheckpointSaver: sync -------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._sync(self._find(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        yield from self._sync(self._list(config, filter, before, limit))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._sync(self._put(config, checkpoint, metadata))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._sync(self._put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._sync(self._delete(str(thread_id)))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._sync(self._delete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._sync(self._copy(str(source_thread_id), str(target_thread_id)))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._sync(self._prune([str(t) for t in thread_ids], strategy))


def _key(*parts: str) -> str:
    """An idempotency key (W6) of bounded length for these parts."""
    return parts[0] + ":" + hashlib.sha256("\x00".join(parts[1:]).encode()).hexdigest()


def _retarget(entry: NewEntry, thread_id: str) -> NewEntry:
    if entry.kind != CHECKPOINT:
        return entry
    return NewEntry(CHECKPOINT, {**entry.data, "thread": thread_id})


def _all_but_latest(live: list[Entry]) -> set[tuple[str, str]]:
    """Every checkpoint but the latest of each namespace."""
    latest = {e.data["ns"]: e.data["id"] for e in live}
    return {(e.data["ns"], e.data["id"]) for e in live if latest[e.data["ns"]] != e.data["id"]}


def _among(scan: ThreadScan, part: set[tuple[str, str]]) -> Callable[[Entry], bool]:
    """Whether an entry is a live checkpoint of ``part``."""
    return lambda e: scan.live(e) and (e.data["ns"], e.data["id"]) in part


async def _one(value: str) -> AsyncIterator[str]:
    yield value
