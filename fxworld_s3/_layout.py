"""The key layout and the objects stored under it (see docs/s3.md).

Under ``{prefix}{namespace}/``::

    s/{sid}/g                       generation pointer {"g": n, "E": epoch}: the live log
    s/{sid}/{g}/b/{first:020d}      one append batch, created with If-None-Match: *
    s/{sid}/{g}/c/{first}-{last}    a segment: a copy of the batches first..last
    w/{sid}                         the session's wake state, changed with If-Match
    wd/{p}/{t:015d}/{sid}/{nonce}   a due index key: the session's wake state may be
                                    deliverable from t (ms since the epoch) on; p is
                                    one of DUE_PREFIXES prefixes, by the session id
    wd/@{agent}/{p}/{t}/{sid}/{nonce}   the same, for a session ``agent`` owns (W19):
                                    its nonce is ``{agent}~{hex}``, so a cover's
                                    ``(t, nonce)`` names its key
    o/{sid}                         the session's owner {"agent": name}, created once
                                    with If-None-Match: * (``claim``, W19)
    a/{agent}                       an agent that owns sessions here (what a take
                                    for any agent lists beside the shared prefixes)
    m/{sid}                         marker {"g": n}: the session has (had) a batch in
                                    generation n; listed by ``list_sessions``

A batch's key is its first seq, so exactly one writer wins each position (W4). A
writer only ever creates the position right after a batch it has read, so the
batches of a generation form a chain with no hole (W9). Each batch carries the
newest epoch issued so far (``E``) and whether that epoch's fence entry is in this
generation (``V``): the log is the fence (W1, W2, W8). A batch with ``D`` ends its
generation (``delete``): the next generation starts empty, with ``E`` carried over
so that epochs keep growing (W1, W14).

Key maps (W6, a fresh world's keyed append at a constant cost): a segment's last
batch carries ``S`` = ``{key: last seq of its call}``, every key of its generation up
to the segment's end (a segment written by an earlier version has none); a batch
carries ``kf`` and ``K``, every key of the positions ``kf`` to just before it, when
its writer knew them.

Large values (docs/large-values.md): a batch whose data is over :data:`INLINE_BYTES`
is copied into segments (and held in a world's memory) without its entries, marked
``r``; a reader GETs the batch's own object for them. Batches are never removed
while their generation lives, so the reference always resolves (after a ``delete``
the object is a stub and the reader restarts, as on any position of an ended
generation).
"""

from __future__ import annotations

import uuid
import zlib
from dataclasses import dataclass, field, replace
from typing import Any

from fxworld_s3._store import dumps, loads

__all__ = ["Keys", "Batch", "start_of", "DUE_PREFIXES", "INLINE_BYTES", "LARGEST_ENTRY"]

LARGEST_ENTRY = (5 << 30) // 2 - (1 << 20)
"""The largest ``max_entry_bytes``: a batch is one object, one ``PutObject`` of at most
5 GiB, and in it an entry's JSON is a JSON string, which escaping may double."""

_W = 20
INLINE_BYTES = 1 << 20
"""A batch whose entries' data (JSON characters) is over this is a large batch:
segments and memory hold it without its entries (``ref``)."""
_T = 15  # digits of a due index key's time in ms (enough until the year 33658)
DUE_PREFIXES = 4
"""Prefixes the due index is spread over, so that no single prefix is hot."""


class Keys:
    """The keys of one namespace."""

    def __init__(self, root: str) -> None:
        self.root = root

    def gen(self, sid: str) -> str:
        return f"{self.root}s/{sid}/g"

    def batches(self, sid: str, gen: int) -> str:
        return f"{self.root}s/{sid}/{gen}/b/"

    def batch(self, sid: str, gen: int, first: int) -> str:
        return f"{self.batches(sid, gen)}{first:0{_W}d}"

    def segments(self, sid: str, gen: int) -> str:
        return f"{self.root}s/{sid}/{gen}/c/"

    def segment(self, sid: str, gen: int, first: int, last: int) -> str:
        return f"{self.segments(sid, gen)}{first:0{_W}d}-{last:0{_W}d}"

    def wakes(self) -> str:
        return f"{self.root}w/"

    def wake(self, sid: str) -> str:
        return f"{self.root}w/{sid}"

    def due_index(self) -> str:
        return f"{self.root}wd/"

    def due_prefixes(self, agent: str | None = None) -> list[str]:
        """The shared prefixes of the due index, or ``agent``'s own (W19)."""
        owner = "" if agent is None else f"@{agent}/"
        return [f"{self.root}wd/{owner}{p}/" for p in range(DUE_PREFIXES)]

    def due(self, sid: str, t_ms: int, nonce: str) -> str:
        """A due index key of ``sid`` at ``t_ms``; its prefix is fixed by the id,
        and by the owner its nonce names (W19)."""
        p = zlib.crc32(sid.encode()) % DUE_PREFIXES
        agent = self.agent_of(nonce)
        owner = "" if agent is None else f"@{agent}/"
        return f"{self.root}wd/{owner}{p}/{t_ms:0{_T}d}/{sid}/{nonce}"

    def parse_due(self, key: str) -> tuple[int, str, str]:
        """``(t_ms, sid, nonce)`` of a due index key (session ids and agent names
        hold no ``/``)."""
        t, sid, nonce = key.rsplit("/", 3)[1:]
        return int(t), sid, nonce

    @staticmethod
    def nonce(agent: str | None) -> str:
        """A fresh nonce for an index key, naming the owner when there is one."""
        tail = uuid.uuid4().hex[:12]
        return tail if agent is None else f"{agent}~{tail}"

    @staticmethod
    def agent_of(nonce: str) -> str | None:
        """The owner a nonce names (``None``: a shared key)."""
        agent, sep, _ = nonce.rpartition("~")
        return agent if sep else None

    def owner(self, sid: str) -> str:
        return f"{self.root}o/{sid}"

    def agents(self) -> str:
        return f"{self.root}a/"

    def agent(self, name: str) -> str:
        return f"{self.root}a/{name}"

    def markers(self) -> str:
        return f"{self.root}m/"

    def marker(self, sid: str) -> str:
        return f"{self.root}m/{sid}"

    def probe(self, token: str) -> str:
        return f"{self.root}setup-probe-{token}"

    @staticmethod
    def first_of(key: str) -> int:
        return int(key[-_W:])

    @staticmethod
    def range_of(segment_key: str) -> tuple[int, int]:
        return int(segment_key[-2 * _W - 1 : -_W - 1]), int(segment_key[-_W:])


@dataclass(frozen=True)
class Batch:
    """One append (or a fence, or a generation's end) as stored at its position."""

    first: int
    count: int
    top: int  # E: the newest epoch issued up to and including this batch
    held: bool  # V: that epoch's fence entry is in this generation
    epoch: int | None = None  # the epoch of this batch's entries (None: unfenced)
    key: str | None = None  # idempotency key (W6)
    token: str = ""  # names the call that wrote it: a retry recognises its own batch
    wake: float | None = None  # the wake this append asked for (W7)
    at: float = 0.0  # commit time, seconds since the epoch (the writer's clock)
    items: list[tuple[str, str]] = field(default_factory=list)  # (kind, JSON data)
    deleted: bool = False  # D: the generation ends here (delete)
    real: bool = True  # False for the empty start of a generation (no object)
    keys_from: int | None = None  # kf: keys_before holds every key of positions kf..first-1
    keys_before: dict[str, int] = field(default_factory=dict)  # K: key -> last seq (W6)
    ref: bool = False  # r: its entries are not here: read them from the batch's own object

    def slim(self) -> Batch:
        """This batch as a segment or a world's memory holds it: a large batch
        (over :data:`INLINE_BYTES`) without its entries, marked ``ref``."""
        if self.ref or sum(len(data) for _, data in self.items) <= INLINE_BYTES:
            return self
        return replace(self, items=[], ref=True)

    @property
    def last(self) -> int:
        return self.first + self.count - 1

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "f": self.first,
            "n": self.count,
            "E": self.top,
            "V": self.held,
            "t": self.token,
            "at": self.at,
            "x": [list(i) for i in self.items],
        }
        for name, value in (("e", self.epoch), ("k", self.key), ("w", self.wake)):
            if value is not None:
                out[name] = value
        if self.deleted:
            out["D"] = True
        if self.ref:  # "x": null, so that a world of an earlier version fails to read
            out["r"], out["x"] = True, None  # it rather than miss its entries
        if self.keys_from is not None:
            out["kf"] = self.keys_from
            out["K"] = self.keys_before
        return out

    def body(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Batch:
        return cls(
            first=int(d["f"]),
            count=int(d["n"]),
            top=int(d["E"]),
            held=bool(d["V"]),
            epoch=d.get("e"),
            key=d.get("k"),
            token=str(d.get("t", "")),
            wake=d.get("w"),
            at=float(d.get("at", 0.0)),
            items=[(str(k), str(v)) for k, v in d.get("x") or []],
            deleted=bool(d.get("D", False)),
            keys_from=d.get("kf"),
            keys_before={str(k): int(s) for k, s in d.get("K", {}).items()},
            ref=bool(d.get("r", False)),
        )

    @classmethod
    def parse(cls, body: bytes) -> Batch:
        return cls.from_json(loads(body))


def start_of(top: int) -> Batch:
    """The empty start of a generation whose epochs continue after ``top``."""
    return Batch(first=1, count=0, top=top, held=False, real=False)
