"""How a LangGraph thread is kept in a World (the layout ``WorldSaver`` writes and
its compaction rewrites).

One thread is one session, :func:`thread_session` of its id. Its entries, by kind:

- ``lg.checkpoint`` (:data:`CHECKPOINT`): one checkpoint, with its namespace ``ns``,
  ``id``, ``parent`` id, ``thread`` id, encoded ``checkpoint`` (without its channel
  values, small ones aside) and ``metadata``, ``values``: where each other channel's
  value is, and ``early``: the seq from which its writes that landed before it are
  found, if any did. A checkpoint written before channel values were kept apart (no
  ``values``) holds them in ``checkpoint``, and is read as it was;
- ``lg.blob`` (:data:`BLOB`): one channel's value at one version (``ns``,
  ``channel``, ``version``, encoded ``value``), written once, in the append of
  the first checkpoint that holds it (:mod:`~fxworld.integrations.langgraph_values`);
- ``lg.writes`` (:data:`WRITES`): one ``put_writes`` call, to the checkpoint
  ``checkpoint`` of namespace ``ns``;
- ``lg.dropped`` (:data:`DROPPED`): checkpoints (``[ns, id]`` pairs) that reads
  skip from then on, written when a thread could not be compacted because it was
  being written;
- ``lg.compacting`` (:data:`COMPACTING`): a compaction looked at the log up to
  this entry (it is deleted with the log when the compaction goes through);
- ``lg.restoring`` (:data:`RESTORING`, not one of :data:`KINDS`): a mark, with a
  random ``mark``, that a compaction's write-back puts in the emptied thread before
  it writes the kept checkpoints back.

Besides it, for a compaction under way: the staging session
:func:`staging_session`, whose first entry (``lg.staged``, :data:`STAGED`, with
the compaction's ``token``) is followed by the checkpoints and writes it keeps,
then by one ``lg.restoring`` record per write-back begun (the ``mark`` it put in
the thread first).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from fxworld.protocol import World
from fxworld.types import Entry

__all__ = [
    "PREFIX",
    "CHECKPOINT",
    "WRITES",
    "DROPPED",
    "COMPACTING",
    "BLOB",
    "STAGED",
    "RESTORING",
    "KINDS",
    "thread_session",
    "staging_session",
    "is_thread_session",
    "ThreadScan",
    "whole",
]

PREFIX = "lg."
"""Every LangGraph thread's session id starts with this."""

CHECKPOINT, WRITES, DROPPED, COMPACTING, BLOB = KINDS = (
    "lg.checkpoint",
    "lg.writes",
    "lg.dropped",
    "lg.compacting",
    "lg.blob",
)
"""The entry kinds a thread's log holds."""

STAGED = "lg.staged"
"""The first entry of a staging session."""

RESTORING = "lg.restoring"
"""A write-back's mark in the thread, and its record in the staging session."""

_HEX = 40
_STAGING = ".kept"


def thread_session(thread_id: str) -> str:
    """The session id of a LangGraph thread: always valid (W15), whatever the id."""
    return PREFIX + hashlib.sha256(str(thread_id).encode()).hexdigest()[:_HEX]


def staging_session(sid: str) -> str:
    """Where a compaction of the thread ``sid`` stages what it keeps."""
    return sid + _STAGING


def is_thread_session(sid: str) -> bool:
    """Whether ``sid`` is a thread's session (not a staging one, not another's)."""
    return sid.startswith(PREFIX) and len(sid) == len(PREFIX) + _HEX


@dataclass
class ThreadScan:
    """What one scan of a thread's log has seen so far (newest first)."""

    dropped: set[tuple[str, str]] = field(default_factory=set)
    writes: dict[tuple[str, str], list[Entry]] = field(default_factory=dict)
    blobs: dict[int, Entry] = field(default_factory=dict)
    """The channel values seen, by seq."""
    held: bool = False
    """Whether the log held any LangGraph entry (not only fences)."""

    def see(self, entry: Entry) -> None:
        """Note a writes, dropped or blob entry."""
        data = entry.data
        self.held = self.held or entry.kind in KINDS
        if entry.kind == DROPPED:
            self.dropped.update((ns, cid) for ns, cid in data["checkpoints"])
        elif entry.kind == BLOB:
            self.blobs[entry.seq] = entry
        elif entry.kind == WRITES:
            self.writes.setdefault((data["ns"], data["checkpoint"]), []).append(entry)

    def live(self, entry: Entry) -> bool:
        """Whether ``entry`` is a checkpoint that was not dropped."""
        data = entry.data
        return entry.kind == CHECKPOINT and (data["ns"], data["id"]) not in self.dropped


async def whole(world: World, sid: str) -> list[Entry]:
    """Every entry of the log, oldest first."""
    entries: list[Entry] = []
    while page := await world.read(sid, entries[-1].seq if entries else 0):
        entries.extend(page)
    return entries
