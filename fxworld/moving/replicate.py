"""Reproduce one session's log on a target world through the public World protocol.

The source's entries come in order; each lands on the target at the same position:

- a ``fence`` entry is reproduced by ``acquire()`` on the target, which lands at the
  next position (W1); the target's epoch is greater than any it handed out for the
  session, so it may differ from the source's (a source whose epochs are not dense
  from 1, a target session deleted before): the copy keeps the order of takeovers,
  not their numbers;
- the fenced entries after it are appended with that target fence (W2), the
  unfenced ones without a fence (W3), every append with ``expect=`` the position
  before it (W5), so nothing lands elsewhere. Consecutive entries of one kind of
  append go in one call (W4), at most :data:`BATCH_ENTRIES` entries or about
  :data:`BATCH_BYTES`;
- an entry with an idempotency key is appended alone under that key (W6).

**Resuming.** The target's log is read first and compared, entry by entry, with the
source's start (:func:`~fxworld.moving.digest.canonical`); the copy goes on after
the last entry they share, so a rerun after an interruption (a killed process, a
lost connection) writes each missing entry once and nothing twice, and a session
that grew in the source since is brought up to date. An append is atomic (W4), so
an interrupted one landed whole or not at all. If the copy stopped between a
takeover and the entries after it, the target's last ``fence`` entry gives the
fence back (a fence is its session, epoch and seq: :class:`~fxworld.types.Fence`).
:meth:`Replicator.holds` is that comparison alone: the callers compare every
session before they write any (all or nothing), then :meth:`Replicator.feed` the
rest.

A target log that is not the start of the source's (another process wrote to it,
took it over, or the source was deleted and begun again) raises
:class:`~fxworld.errors.SessionDiverged` and nothing more is written to it. So does
a source entry that no caller can write: a fenced entry whose epoch is not the
latest takeover's before it, or a kind reserved by W1 other than ``fence``. Found
while comparing, nothing was written at all; found later (only when another process
writes to the target session meanwhile, or a source hands out such an entry), the
writes before it stay.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from fxworld.errors import Conflict, Fenced, SessionDiverged
from fxworld.protocol import World
from fxworld.types import Entry, Fence, NewEntry

from .digest import canonical

__all__ = ["Replicator", "Reproducible", "read_pages", "BATCH_ENTRIES", "BATCH_BYTES"]

BATCH_ENTRIES = 256
"""At most this many entries per append on the target."""
BATCH_BYTES = 1 << 20
"""About this many bytes of entry data per append on the target (and per read)."""


async def read_pages(world: World, sid: str, after: int = 0) -> AsyncIterator[list[Entry]]:
    """The log after ``after`` in pages of at most :data:`BATCH_ENTRIES` entries,
    fewer when entries are large (about :data:`BATCH_BYTES` a page)."""
    limit = 16
    while page := await world.read(sid, after, limit=limit):
        yield page
        after = page[-1].seq
        largest = max(len(json.dumps(e.data)) for e in page)
        limit = max(1, min(BATCH_ENTRIES, BATCH_BYTES // max(largest, 1)))


class Reproducible:
    """Refuses, entry by entry, a source log that no caller could have written through
    the protocol (so that no copy can reproduce it)."""

    def __init__(self, sid: str) -> None:
        self.sid = sid
        self.epoch: int | None = None  # the latest takeover's epoch
        self.seen = 0  # the last seq seen

    def see(self, entry: Entry) -> None:
        self.seen = entry.seq
        if entry.kind == "fence" and entry.epoch is None:
            raise SessionDiverged(self.sid, entry.seq, "a takeover without an epoch (W1)")
        if entry.kind == "fence":
            self.epoch = entry.epoch
        elif entry.kind.startswith("fence"):
            raise SessionDiverged(self.sid, entry.seq, f"kind {entry.kind!r} is reserved (W1)")
        elif entry.epoch is not None and entry.epoch != self.epoch:
            raise SessionDiverged(
                self.sid,
                entry.seq,
                f"fenced with epoch {entry.epoch}, but the latest takeover before it has "
                f"epoch {self.epoch}: no caller can write such a log (W2, W8)",
            )


@dataclass
class _Batch:
    entries: list[NewEntry] = field(default_factory=list)
    first: int = 0
    fenced: bool = False
    size: int = 0


class Replicator:
    """Brings session ``sid`` of ``target`` up to the source entries fed to it."""

    def __init__(self, target: World, sid: str) -> None:
        self.target = target
        self.sid = sid
        self.theirs: list[Entry] = []  # target entries read ahead, not yet compared
        self.target_read = 0  # the last target seq read
        self.target_ended = False
        self.fed = 0  # the last source seq fed
        self.written = 0  # entries written by this run
        self.fence: Fence | None = None  # the target's newest fence
        self.check = Reproducible(sid)
        self.keys: set[str] = set()
        self.batch = _Batch()

    async def holds(self, entry: Entry, key: str | None) -> bool:
        """Compare the source's next entry with the target's at its position, writing
        nothing: ``True`` if the target holds it, ``False`` if the target ends before
        it (the entry is not taken: :meth:`feed` it to write it). A target that
        holds something else raises :class:`~fxworld.errors.SessionDiverged`."""
        theirs = await self._next_of_target()
        if theirs is None:
            return False
        self._take(entry)
        self._match(entry, theirs, key)
        return True

    async def feed(self, entry: Entry, key: str | None) -> None:
        """Take the source's next entry: compare it with the target's, or write it."""
        if await self.holds(entry, key):
            return
        self._take(entry)
        if entry.kind == "fence":
            await self.flush()
            await self._acquire(entry)
        else:
            if key is not None and key in self.keys:
                key = None  # the key already stands for an earlier entry: W6 would drop it
            await self._add(entry, key)

    def _take(self, entry: Entry) -> None:
        if entry.seq != self.fed + 1:
            raise SessionDiverged(self.sid, self.fed + 1, f"the source skipped to seq {entry.seq}")
        self.check.see(entry)
        self.fed = entry.seq

    async def answered(self) -> bool:
        """Write what is left; whether the target goes on past the source (the
        source's whole log, then more: a worker answered the session there)."""
        await self.flush()
        return await self._next_of_target() is not None

    async def finish(self) -> int:
        """Write what is left; refuse a target longer than the source. Returns the
        number of entries this run wrote."""
        if await self.answered():
            raise SessionDiverged(
                self.sid, self.fed + 1, "the target holds entries the source has not"
            )
        return self.written

    async def _next_of_target(self) -> Entry | None:
        """The target's entry at the position being fed, if the target has it."""
        if not self.theirs and not self.target_ended:
            self.theirs = await self.target.read(self.sid, self.target_read, limit=BATCH_ENTRIES)
            self.theirs.reverse()
            if self.theirs:
                self.target_read = self.theirs[0].seq
            self.target_ended = not self.theirs
        return self.theirs.pop() if self.theirs else None

    def _match(self, ours: Entry, theirs: Entry, key: str | None) -> None:
        if canonical(theirs) != canonical(ours):
            raise SessionDiverged(
                self.sid, ours.seq, f"the target holds a {theirs.kind!r} where the source has a "
                f"{ours.kind!r} entry (or other data)",
            )  # fmt: skip
        if theirs.kind == "fence" and theirs.epoch is not None:
            self.fence = Fence(self.sid, theirs.epoch, theirs.seq)
        if key is not None:
            self.keys.add(key)

    async def _acquire(self, entry: Entry) -> None:
        # acquire() takes no expect= (W1): it lands wherever the log ends. Before this
        # run's first write, the target was last read some time ago (all sessions
        # are compared before any is written), so look again: a fence that landed
        # elsewhere would stay behind and fence out whoever writes there.
        if self.written == 0 and await self.target.read(self.sid, entry.seq - 1, limit=1):
            raise SessionDiverged(self.sid, entry.seq, "another process wrote to the target")
        fence = await self.target.acquire(self.sid)  # W1: lands at the next position
        self.written += 1
        self.fence = fence
        if fence.seq != entry.seq:
            raise SessionDiverged(
                self.sid, entry.seq, f"the takeover landed at seq {fence.seq}: another "
                "process writes to the target session",
            )  # fmt: skip

    async def _add(self, entry: Entry, key: str | None) -> None:
        fenced = entry.epoch is not None
        size = len(json.dumps(entry.data))
        b = self.batch
        full = len(b.entries) >= BATCH_ENTRIES or b.size + size > BATCH_BYTES
        if b.entries and (key is not None or full or b.fenced != fenced):
            await self.flush()
            b = self.batch
        if not b.entries:
            b.first, b.fenced = entry.seq, fenced
        b.entries.append(NewEntry(entry.kind, entry.data))
        b.size += size
        if key is not None:
            self.keys.add(key)
            await self.flush(key)

    async def flush(self, key: str | None = None) -> None:
        """Append the batch gathered so far in one call, at its positions."""
        b, self.batch = self.batch, _Batch()
        if not b.entries:
            return
        fence = self.fence if b.fenced else None
        expected = b.first + len(b.entries) - 1
        try:
            last = await self.target.append(
                self.sid, b.entries, fence=fence, expect=b.first - 1, key=key
            )
        except Conflict as e:  # W5: nothing written
            raise SessionDiverged(
                self.sid, b.first, f"another process wrote to the target (it is at {e.last})"
            ) from None
        except Fenced:  # W2: nothing written
            raise SessionDiverged(
                self.sid, b.first, "another process took the target session over"
            ) from None
        if last != expected:  # a keyed repeat (W6) that stands elsewhere
            raise SessionDiverged(self.sid, b.first, f"key {key!r} already stands at seq {last}")
        self.written += len(b.entries)
