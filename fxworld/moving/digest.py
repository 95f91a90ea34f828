"""The form in which a copy and its source must agree, and its hash (``--verify``).

Two logs agree when, position by position, they hold the same kind and data, and
the same entries are fenced. Epoch numbers and commit times are not compared: a
copy's epochs are the target's own (each source takeover is a takeover on the
target, so the order is kept, not the numbers) and its times are the copy's. A
``fence`` entry's data is its epoch, so it is compared by kind only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from fxworld.types import Entry

__all__ = ["canonical", "Digest"]


def canonical(entry: Entry) -> bytes:
    """What of ``entry`` a faithful copy keeps, as bytes."""
    data = {} if entry.kind == "fence" else entry.data
    fenced = entry.epoch is not None
    line = [entry.seq, entry.kind, fenced, data]
    return json.dumps(line, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass
class Digest:
    """A running count and SHA-256 of a log's :func:`canonical` entries."""

    count: int = 0

    def __post_init__(self) -> None:
        self._hash = hashlib.sha256()

    def add(self, entry: Entry) -> None:
        self.count += 1
        self._hash.update(canonical(entry) + b"\n")

    @property
    def hexdigest(self) -> str:
        return self._hash.hexdigest()
