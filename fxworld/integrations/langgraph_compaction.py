"""Compacting a LangGraph thread: what ``prune(strategy="keep_latest")`` and
``delete_for_runs`` do to free the storage of the checkpoints they remove.

A log is append-only (W4): the only way to free part of it is to delete the whole
session (W14) and write back what is kept. :func:`compact` does it so that the
thread is never rewritten while it is being written, and nothing kept is lost if
the process dies at any point:

1. It reads the whole log (up to its end, ``n``) and works out what is kept: each
   kept checkpoint followed by its writes, in log order, and nothing else (no
   fence, no dropped checkpoint, no write whose checkpoint is not kept).
2. It appends ``lg.compacting`` with ``expect=n`` (W5): refused if anything was
   appended since it looked. Two compactions of one thread cannot both pass
   this step on the same log: the later one's marker comes after the earlier one's.
3. It stages what it keeps in the staging session (deleted first: what is there
   belongs to a compaction that is done, or to one whose marker came before this
   one's, which can therefore no longer delete the thread), with ``expect=0``.
4. It deletes the thread only if its log still ends at the marker
   (``delete_if_idle``, one atomic step: a write since the marker wins, W14).
5. It writes what it keeps back into the empty thread (:func:`_write_back`): a
   mark (``lg.restoring`` with a random ``mark``) in the thread, the same record
   in the staging session, then the kept entries in one append (W4) with
   ``expect=`` the mark (W5); and it deletes the staging session (only if it
   still holds this compaction's set).

A thread is being written when its newest entry is younger than ``quiet`` seconds
(a run's fence, checkpoint or writes, by the world's commit time): it is not
compacted at all (no marker, no delete: a delete would refuse the running writer's
fence, W14). A refusal at 2, 3 or 4, or a thread being written, leaves the thread
as it was, and the checkpoints to remove are hidden behind an ``lg.dropped`` entry
instead (W3: it lands whatever the thread's writer does, and takes no fence), for a
later compaction to free. Only a run that has written nothing for ``quiet`` seconds
(a node running longer than that) can still be refused at its next write
(``ThreadTakenOver``, W14).

Between 4 and 5 the thread is empty. A reader that finds a thread holding no
LangGraph entry (:func:`newest_first`) looks in the staging session and, if a set
is staged there, writes it back itself (step 5, ``expect=`` the log's end, so it
happens once): a crash between 4 and 5 loses nothing, and a run that starts in
between reads the kept checkpoints. So does every other access of a thread:
:func:`thread_entries` (a compaction's read, ``copy_thread``), and a listing of the
threads (``list(None)``, ``delete_for_runs``), which finds such a thread by its
staging session (the thread's id and a suffix) and writes it back before it
looks at it. Deleting a thread deletes its staging session first.

A staged set is written back only into the thread it was staged for, never over
one deleted since by another path (``World.delete``, ``fxworld prune``):

- killed after its write-back and before the staging delete, a compaction leaves
  a stale set, which names the mark it put in the thread. A write-back goes on
  only while the thread holds one of the marks recorded (or none was recorded): a
  log deleted since a write-back began holds none, so the set is deleted instead.
  :func:`thread_entries` and the listings also delete a set staged for a thread
  that holds LangGraph entries and does not end at that compaction's marker
  (written back, or written since: it can never be used);
- killed after its marker and before its delete, a compaction leaves the thread
  ending at the marker, and maybe a staged set. The next read of the thread that
  finds the log ending at a marker ends that compaction (an empty ``lg.dropped``
  appended with ``expect=`` the marker, so a compaction still under way is
  refused at its delete, and falls back to ``lg.dropped``) and deletes its staged
  set (the marker names it by its token); so do the listings and
  :func:`thread_entries`, through the rule above, once the thread was written.

What no reader can tell apart: a thread deleted by another path while it ends at
a killed compaction's marker, with no access in between, is in the very state a
compaction's own delete leaves (an empty log, a set staged with no write-back
begun; a delete leaves no trace, W14). Its set is written back (the old thread's
kept checkpoints), as it must be after the compaction's own delete: losing them
there would be worse. ``WorldSaver.delete_thread`` and ``prune(strategy=
"delete")`` delete the staging session first, and ``fxworld prune`` deletes it
with the thread (it is as idle as the thread), so only a bare ``World.delete`` of
the thread, or a ``fxworld prune`` stopped between the two, meets that case.

Costs: a compaction reads the whole thread once, then makes 12 requests: the
marker, the staging delete, the stage, the delete, the write-back (a read of the
staged set, 2 requests, a look at the empty thread, the mark, its record and one
append) and the staging delete (a look and a conditional delete). ``copy_thread`` and a
compaction's read look at the staging session once more (one request). A read of
a thread with no checkpoint at all (a new thread) costs 2 requests more than one
of a thread that has some: the staging session and the log's end again.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from fxworld.errors import Conflict
from fxworld.logends import FIRST_PAGE, LAST_PAGE, last_seq, window
from fxworld.protocol import IdleDeleter, World
from fxworld.types import Entry, NewEntry

from .langgraph_log import (
    BLOB,
    CHECKPOINT,
    COMPACTING,
    DROPPED,
    RESTORING,
    STAGED,
    WRITES,
    ThreadScan,
    staging_session,
    whole,
)
from .langgraph_values import carried

__all__ = [
    "compact",
    "newest_first",
    "thread_entries",
    "normalized",
    "delete_thread",
]

_ATTEMPTS = 8
"""How often a write-back retries when the empty thread was appended to (a run
taking it over, another reader writing it back) between its look and its append."""

Choose = Callable[[list[Entry]], set[tuple[str, str]]]
"""Given a thread's live checkpoints (oldest first), the ``(ns, id)`` to remove."""


def normalized(entries: list[Entry], keep: Callable[[Entry], bool]) -> list[NewEntry]:
    """Each checkpoint of ``entries`` that ``keep`` accepts, without ``early``,
    preceded by the values it names that come first here and followed by its
    writes, in log order: a log that reads back as ``entries`` did for those
    checkpoints, wherever it is appended in one piece (no position of the source
    is named: :func:`~fxworld.integrations.langgraph_values.carried`)."""
    writes: dict[tuple[str, str], list[NewEntry]] = {}
    by_seq: dict[int, Entry] = {}
    for e in entries:
        if e.kind == WRITES:
            writes.setdefault((e.data["ns"], e.data["checkpoint"]), []).append(
                NewEntry(WRITES, e.data)
            )
        elif e.kind == BLOB:
            by_seq[e.seq] = e
    out: list[NewEntry] = []
    written: dict[int, int] = {}
    for e in entries:
        if e.kind == CHECKPOINT and keep(e):
            out.append(carried(e, by_seq, out, written))
            out.extend(writes.pop((e.data["ns"], e.data["id"]), []))
    return out


async def compact(world: World, sid: str, choose: Choose, *, quiet: float = 0.0) -> bool:
    """Remove from the thread ``sid`` the checkpoints ``choose`` names, with their
    writes, freeing their storage and that of those an ``lg.dropped`` hid (see the
    module). Whether it rewrote the thread. When it cannot (the world has no
    ``delete_if_idle``, or the thread was written meanwhile), it hides them behind
    an ``lg.dropped`` entry instead (W3), for a later compaction to free; so it
    does, without taking the thread, when the thread was written less than
    ``quiet`` seconds ago (being written)."""
    entries = await thread_entries(world, sid)
    scan = ThreadScan()
    for e in entries:
        scan.see(e)
    live = [e for e in entries if scan.live(e)]
    gone = choose(live)
    hidden = len(live) < sum(e.kind == CHECKPOINT for e in entries)
    if not (gone or hidden):
        return False
    kept = normalized(entries, lambda e: scan.live(e) and (e.data["ns"], e.data["id"]) not in gone)
    written = datetime.now(UTC) - entries[-1].at < timedelta(seconds=quiet)  # being written
    swap = not written and isinstance(world, IdleDeleter)
    if swap and await _swap(world, sid, entries[-1].seq, kept):
        return True
    if gone:
        await world.append(sid, [NewEntry(DROPPED, {"checkpoints": sorted(map(list, gone))})])
    return False


async def _swap(world: World, sid: str, end: int, kept: list[NewEntry]) -> bool:
    """Steps 2 to 5 of the module's list."""
    deleter: Any = world  # an IdleDeleter (checked by the caller)
    token = uuid.uuid4().hex
    try:
        marker = await world.append(sid, [NewEntry(COMPACTING, {"token": token})], expect=end)
    except Conflict:  # W5
        return False
    staging, staged = staging_session(sid), 0
    await world.delete(staging)  # stale, or its compaction can no longer delete
    if kept:
        try:
            head = NewEntry(STAGED, {"token": token})
            staged = await world.append(staging, [head, *kept], expect=0)  # W5
        except Conflict:
            return False
    if not await deleter.delete_if_idle(sid, last=marker):  # W14, atomic with appends
        await _unstage(world, staging, token, staged)
        return False
    if kept:
        await _write_back(world, sid)
    return True


def _holds(entries: list[Entry]) -> bool:
    """Whether a thread's entries hold any LangGraph entry (not only fences and
    write-back marks)."""
    return any(e.kind in (CHECKPOINT, WRITES, DROPPED, COMPACTING) for e in entries)


async def _write_back(world: World, sid: str) -> bool:
    """Step 5 (see the module): write what is staged for the thread ``sid`` back into
    it, once, unless the thread holds LangGraph entries by now (written back
    already) or was deleted since a write-back began (a staged set that can never
    be written back: deleted). Whether a set was staged (the thread may have
    changed: read it again)."""
    staging = staging_session(sid)
    for attempt in range(_ATTEMPTS):
        staged = await whole(world, staging)
        kept = [NewEntry(e.kind, e.data) for e in staged if e.kind in (CHECKPOINT, WRITES, BLOB)]
        if not kept:
            return False
        token, last = str(staged[0].data.get("token", "")), staged[-1].seq
        present = await whole(world, sid)
        records = {e.data.get("mark") for e in staged if e.kind == RESTORING}
        marks = {e.data.get("mark") for e in present if e.kind == RESTORING}
        if _holds(present) or (records and not records & marks):
            await _unstage(world, staging, token, last)  # written back, or deleted since
            return True
        mark = {"mark": uuid.uuid4().hex}
        try:
            at = await world.append(
                sid, [NewEntry(RESTORING, mark)], expect=present[-1].seq if present else 0
            )
            last = await world.append(staging, [NewEntry(RESTORING, mark)], expect=last)
            await world.append(sid, kept, expect=at)  # W4: all at once
        except Conflict:  # W5: another write-back, or a run, came first
            if attempt == _ATTEMPTS - 1:
                raise
            continue
        await _unstage(world, staging, token, last)
        return True
    return True


async def _unstage(world: World, staging: str, token: str, last: int) -> None:
    """Delete the staging session if it still holds exactly the set ``token``
    staged (ending at ``last``): never another compaction's."""
    if not last:
        return
    head = await world.read(staging, 0, limit=1)
    if head and head[0].kind == STAGED and head[0].data.get("token") == token:
        deleter: Any = world
        await deleter.delete_if_idle(staging, last=last)


async def _recover(world: World, sid: str, end: int) -> bool:
    """After a read of the thread found no LangGraph entry up to ``end``: write
    back what a compaction staged, if it was stopped between its delete and its
    write-back. Whether the thread may have changed since (read it again)."""
    if await _write_back(world, sid):
        return True
    return await last_seq(world, sid) != end


async def _drop_stale(world: World, sid: str, entries: list[Entry]) -> None:
    """The thread ``sid`` holds LangGraph entries (``entries``, its whole log): a
    set staged for it is stale unless the log ends at the marker of the compaction
    that staged it (one between its stage and its delete). Deleted."""
    staging = staging_session(sid)
    head = await world.read(staging, 0, limit=1)
    if not head or head[0].kind != STAGED:
        return
    token = str(head[0].data.get("token", ""))
    if entries[-1].kind == COMPACTING and entries[-1].data.get("token") == token:
        return  # that compaction is under way (or a read will end it: _abandon)
    await _unstage(world, staging, token, await last_seq(world, staging))


async def thread_entries(world: World, sid: str) -> list[Entry]:
    """The whole log of the thread ``sid``, given back first what a compaction
    staged if the thread holds no LangGraph entry (see the module); a stale staged
    set is deleted."""
    entries = await whole(world, sid)
    if not _holds(entries) and await _recover(world, sid, entries[-1].seq if entries else 0):
        entries = await whole(world, sid)
    if _holds(entries):
        await _drop_stale(world, sid, entries)
    return entries


async def _abandon(world: World, sid: str, marker: Entry) -> None:
    """A read found the thread ending at a compaction's marker (a compaction under
    way, or killed after it staged): end that compaction here, so its staged set can
    never be written back over a thread deleted since by another path. An empty
    ``lg.dropped`` lands only if the log still ends at the marker (W5), and then
    the compaction's delete is refused (W14) and its set is deleted."""
    try:
        await world.append(sid, [NewEntry(DROPPED, {"checkpoints": []})], expect=marker.seq)
    except Conflict:
        return  # written or deleted since: that compaction went on or was refused
    staging = staging_session(sid)
    await _unstage(
        world, staging, str(marker.data.get("token", "")), await last_seq(world, staging)
    )


async def newest_first(
    world: World, sid: str, blobs: dict[int, Entry] | None = None
) -> AsyncIterator[Entry]:
    """The thread's entries, newest first, one page at a time (as
    :func:`~fxworld.logends.backwards`); ``blobs`` is given each page's
    ``lg.blob`` entries before the page is yielded, so that a checkpoint's values
    read with it are not read again. A log that holds no
    LangGraph entry is first given back what a compaction staged (see the
    module); its fences may then be yielded twice."""
    for _ in range(_ATTEMPTS):
        end = await last_seq(world, sid)
        held = False
        upto, size = end, FIRST_PAGE
        while upto > 0:
            after = max(0, upto - size)
            page = await window(world, sid, after, upto)
            if blobs is not None:
                blobs.update((e.seq, e) for e in page if e.kind == BLOB)
            for entry in reversed(page):
                if entry.seq == end and entry.kind == COMPACTING:
                    await _abandon(world, sid, entry)
                held = held or _holds([entry])
                yield entry
            upto, size = after, min(LAST_PAGE, size * 2)
        if held or not await _recover(world, sid, end):
            return


async def delete_thread(world: World, sid: str, *, idle: bool = False) -> bool:
    """Delete the thread ``sid`` and its staging session (first, so that nothing
    staged brings the thread back). ``idle``: only if nothing was appended since
    it was looked at (``delete_if_idle`` where the world has it). Whether the
    thread was deleted."""
    await world.delete(staging_session(sid))
    if not idle or not isinstance(world, IdleDeleter):
        await world.delete(sid)  # W14
        return True
    last = await last_seq(world, sid)
    return bool(last) and await world.delete_if_idle(sid, last=last)
