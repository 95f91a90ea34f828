"""Channel values kept apart from their checkpoints, once per version, as
LangGraph's own savers keep their blobs: a superstep writes the values that
changed, not the whole state again, and a state may be as large as the world's
entries allow for each value (64 MiB by default, docs/large-values.md), whatever
its total.

A checkpoint's ``lg.checkpoint`` entry holds the checkpoint without its channel
values (but for small ones, :data:`INLINE`), and ``values``: for each other channel,
where its ``lg.blob`` entry is. A value whose version is new is written as an
``lg.blob`` just before the checkpoint, in the same append (so it lands with it or
not at all, W4), and named by its distance back from the checkpoint (``-1`` for the
entry just before); one whose version the parent checkpoint already had is named by
its seq in the log (a positive number), as the saver read or wrote it: nothing is
written again. Only a run's checkpoints refer back like this, to a parent it read or
wrote after it took the thread over (so no compaction renumbered the log since,
W14); an edit, or a checkpoint whose parent the saver has not seen, writes every
value.

A compaction or copy writes each kept checkpoint's values again, just before the
first kept checkpoint that holds them, and names them by distance only
(:func:`carried`): a log that reads back the same wherever it is appended.

Reading a checkpoint reads the values it names that the scan has not seen yet:
close seqs in one read (:data:`GAP`), the rest in parallel. Reading the latest
checkpoint costs one read more than a checkpoint holding its values would (its
new values are just before it), and one per group of older values it names.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from fxworld.logends import window
from fxworld.protocol import World
from fxworld.types import Entry, NewEntry

from .langgraph_log import BLOB

__all__ = ["GAP", "INLINE", "Placed", "stored", "placed", "located", "blobs_of", "carried"]

GAP = 8
"""Seqs this close are read in one read (what lies between is read too)."""

INLINE = 512
"""A value whose encoding is at most this many characters stays in its checkpoint
(as LangGraph's own savers keep primitive values inline): an entry of its own would
cost more than the value."""

Placed = dict[str, tuple[Any, int]]
"""Where a checkpoint's values are: channel to (version, seq of its ``lg.blob``)."""


def stored(
    checkpoint: Mapping[str, Any],
    ns: str,
    parent: Placed | None,
    encode: Callable[[Any], list[str]],
) -> tuple[list[NewEntry], dict[str, int], dict[str, Any]]:
    """What a put appends before its checkpoint (the values whose version
    ``parent`` does not hold), the checkpoint's ``values`` and the checkpoint
    without those values (small ones stay in it, :data:`INLINE`)."""
    versions = checkpoint["channel_versions"]
    refs: dict[str, int] = {}
    new: list[NewEntry] = []
    inline: dict[str, Any] = {}
    for channel, value in checkpoint["channel_values"].items():
        version = versions.get(channel)
        old = parent.get(channel) if parent is not None else None
        if old is not None and version is not None and old[0] == version:
            refs[channel] = old[1]
            continue
        encoded = encode(value)
        if len(encoded[1]) <= INLINE:
            inline[channel] = value
            continue
        data = {"ns": ns, "channel": channel, "version": version, "value": encoded}
        new.append(NewEntry(BLOB, data))
    for i, blob in enumerate(new):
        refs[blob.data["channel"]] = i - len(new)
    return new, refs, {**checkpoint, "channel_values": inline}


def placed(refs: Mapping[str, int], versions: Mapping[str, Any], seq: int) -> Placed:
    """Where the values of the checkpoint at ``seq`` are, from its ``values``."""
    return {ch: (versions.get(ch), ref if ref > 0 else seq + ref) for ch, ref in refs.items()}


def located(entry: Entry) -> dict[str, int]:
    """The seq of each value the checkpoint ``entry`` names."""
    refs: dict[str, int] = entry.data.get("values", {})
    return {ch: ref if ref > 0 else entry.seq + ref for ch, ref in refs.items()}


async def blobs_of(
    world: World, sid: str, entry: Entry, seen: dict[int, Entry]
) -> dict[str, Entry]:
    """The ``lg.blob`` entry of each value of the checkpoint ``entry``: from
    ``seen`` (which it adds to), else read (see the module)."""
    at = located(entry)
    missing = sorted({seq for seq in at.values() if seq not in seen})
    spans: list[list[int]] = []
    for seq in missing:
        if spans and seq - spans[-1][1] <= GAP:
            spans[-1][1] = seq
        else:
            spans.append([seq, seq])
    for page in await asyncio.gather(*(window(world, sid, a - 1, b) for a, b in spans)):
        seen.update((e.seq, e) for e in page if e.kind == BLOB)
    return {ch: seen[seq] for ch, seq in at.items()}


def carried(
    entry: Entry, by_seq: Mapping[int, Entry], out: list[NewEntry], written: dict[int, int]
) -> NewEntry:
    """The checkpoint ``entry`` as a compaction or copy writes it at the end of
    ``out``: each value it names is appended to ``out`` first unless ``written``
    (seq in the source to position in ``out``, which it adds to) says ``out``
    holds it already; all are named by their distance back (see the module)."""
    data = {k: v for k, v in entry.data.items() if k != "early"}
    if "values" in data:
        refs: dict[str, int] = {}
        for channel, seq in located(entry).items():
            if seq not in written:
                written[seq] = len(out)
                blob = by_seq[seq]
                out.append(NewEntry(blob.kind, blob.data))
            refs[channel] = written[seq]
        data["values"] = {ch: at - len(out) for ch, at in refs.items()}
    return NewEntry(entry.kind, data)
