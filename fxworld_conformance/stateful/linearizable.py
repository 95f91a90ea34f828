"""The linearizability check of the log state machine (tier 1): a group of calls
that overlapped, once none is in flight, must be explainable by one order of the
writes, each what the model predicts at its point, every other outcome what the
model shows at some point the call spanned (see :mod:`fxworld_conformance.stateful`).
A failure raises :class:`~fxworld_conformance.model.Violation` naming the guarantee."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from fxworld.errors import Conflict, Fenced, WorldError
from fxworld.types import Entry, Fence
from fxworld_conformance.model import (
    LATER,
    NOW,
    Conflicted,
    FencedOut,
    Landed,
    MEntry,
    Repeat,
    SessionModel,
    Violation,
    WakeModel,
)

__all__ = ["Call", "Linearizable"]


@dataclass
class Call:
    """One world call of the log tier: what was asked, when, and what came back."""

    id: int
    kind: str  # "acquire" | "append" | "read"
    sid: str
    actor: str
    start: int
    args: dict[str, Any] = field(default_factory=dict)
    end: float | None = None
    result: Any = None
    error: BaseException | None = None
    task: asyncio.Task[None] | None = None
    first: int = 0
    last: int = 0

    def describe(self) -> str:
        a = self.args
        if self.kind == "acquire":
            call = f"acquire({self.sid!r})"
        elif self.kind == "read":
            call = f"read({self.sid!r}, after={a['after']}, limit={a['limit']})"
        else:
            parts = [f"{len(a['entries'])} entries"]
            if a.get("fence") is not None:
                f = a["fence"]
                parts.append(f"fence=epoch {f.epoch}")
            for name in ("expect", "key", "wake"):
                if a.get(name) is not None:
                    parts.append(f"{name}={a[name]!r}")
            call = f"append({self.sid!r}, {', '.join(parts)})"
        if self.error is not None:
            got = f"raised {type(self.error).__name__}: {self.error}"
        elif self.kind == "acquire" and isinstance(self.result, Fence):
            got = f"-> Fence(epoch={self.result.epoch}, seq={self.result.seq})"
        elif self.kind == "read" and isinstance(self.result, list):
            got = f"-> seqs {[e.seq for e in self.result]}"
        else:
            got = f"-> {self.result!r}"
        end = "?" if self.end is None else f"{self.end:g}"
        return f"op#{self.id} {self.actor} [t{self.start}..t{end}] {call} {got}"


class Linearizable:
    """The check of a group of log calls at quiescence, mixed into the machines:
    the group is linearizable against the model, one session at a time, and a full
    read equals the model's log. The machine provides ``models``, ``wakes``, the
    calls of the group being checked (``_history``) and ``_read_all``."""

    models: dict[str, SessionModel]
    wakes: WakeModel
    _history: list[Call]

    def _read_all(self, sid: str) -> list[Entry]:
        raise NotImplementedError

    def _linearize(self, sid: str, ops: list[Call]) -> None:
        m0 = self.models[sid]
        writes: list[Call] = []
        others: list[Call] = []
        landed_keys: set[str] = set(m0.keys)
        for op in sorted(ops, key=lambda o: o.start):
            if op.error is not None or op.kind == "read":
                others.append(op)
            elif op.kind == "acquire":
                op.first = op.last = op.result.seq
                writes.append(op)
            else:
                key = op.args.get("key")
                if key is not None and key in landed_keys:
                    others.append(op)  # a keyed repeat: writes nothing
                    continue
                if key is not None:
                    landed_keys.add(key)
                op.last = op.result
                op.first = op.result - len(op.args["entries"]) + 1
                writes.append(op)
        writes.sort(key=lambda o: (o.first, o.start))
        for i, w in enumerate(writes):
            for later in writes[i + 1 :]:
                if later.end is not None and later.end < w.start:
                    raise Violation(
                        "W4",
                        "writes out of real-time order: the later call landed first\n  "
                        f"{later.describe()}\n  {w.describe()}",
                    )
        m = m0.copy()
        snaps = [m.copy()]
        for w in writes:
            if w.first != m.last + 1:
                self._position_violation(sid, w, m, writes)
            if w.kind == "acquire":
                why = m.check_acquire(w.result.epoch)
                if why is not None:
                    raise Violation("W1", f"{why}: {w.describe()}")
                m.apply_acquire(w.result.epoch)
            else:
                pred = m.predict_append(
                    len(w.args["entries"]),
                    fence=self._fence_id(w),
                    expect=w.args.get("expect"),
                    key=w.args.get("key"),
                )
                if not isinstance(pred, Landed):
                    raise _wrong_landing(pred, w, m)
                epoch = w.args["fence"].epoch if w.args.get("fence") is not None else None
                m.apply_append(w.args["entries"], epoch=epoch, key=w.args.get("key"))
                if w.args.get("wake") is not None:
                    self.wakes.wake(sid, NOW if w.args["wake"] == 0 else LATER, "append")
            snaps.append(m.copy())
        for op in others:
            if op.kind == "append" and op.args.get("wake") is not None:
                self.wakes.gone(sid, "refused")
        for op in others:
            lo = max(
                (i + 1 for i, w in enumerate(writes) if w.end is not None and w.end < op.start),
                default=0,
            )
            hi = min(
                (i for i, w in enumerate(writes) if op.end is not None and w.start > op.end),
                default=len(writes),
            )
            if not any(self._matches(op, snaps[k]) for k in range(lo, hi + 1)):
                raise _partial_batch(op, writes) or _wrong_outcome(op, snaps[lo : hi + 1], writes)
        self.models[sid] = m

    def _fence_id(self, op: Call) -> tuple[int, int] | None:
        f = op.args.get("fence")
        return None if f is None else (op.args["era"], f.epoch)

    def _matches(self, op: Call, m: SessionModel) -> bool:
        if op.kind == "read":
            if op.error is not None:
                return False
            want = m.read(op.args["after"], op.args["limit"])
            return _same(op.result, want)
        if op.kind == "acquire":
            return False  # an acquire of a valid id never fails
        pred = m.predict_append(
            len(op.args["entries"]),
            fence=self._fence_id(op),
            expect=op.args.get("expect"),
            key=op.args.get("key"),
        )
        e = op.error
        if e is None:
            return isinstance(pred, Repeat) and pred.seq == op.result
        if isinstance(e, Fenced):
            return isinstance(pred, FencedOut)
        if isinstance(e, Conflict):
            return isinstance(pred, Conflicted) and pred.last == e.last
        return False

    def _position_violation(self, sid: str, w: Call, m: SessionModel, writes: list[Call]) -> None:
        if w.first <= m.last:
            torn = self._explain_torn(self._read_all(sid), writes)
            if torn is not None:
                raise torn
            others = [o for o in writes if o is not w and o.first <= w.last and w.first <= o.last]
            raise Violation(
                "W4",
                f"positions {w.first}..{w.last} returned to two calls (a torn or interleaved "
                f"batch, or a duplicate):\n  {w.describe()}\n  "
                + "\n  ".join(o.describe() for o in others),
            )
        actual = self._read_all(sid)
        gap = [e for e in actual if m.last < e.seq < w.first]
        torn = self._explain_torn(actual, writes)
        if torn is not None:
            raise torn
        raise self._explain_extra(sid, gap, m.last + 1, w.first - 1) or Violation(
            "W4",
            f"positions {m.last + 1}..{w.first - 1} were written by no acknowledged call; "
            f"the log there: {_show(gap[:4])}",
        )

    def _torn_in(self, sid: str, ops: list[Call]) -> Violation | None:
        landed = [o for o in ops if o.kind == "append" and o.error is None and _is_int(o.result)]
        for o in landed:
            o.last = o.result
            o.first = o.result - len(o.args["entries"]) + 1
        actual = self._read_all(sid)
        torn = self._explain_torn(actual, landed)
        if torn is not None:
            return torn
        for o in ops:
            if o.kind == "append" and o.error is not None and o.args.get("key") is None:
                left = [
                    e.seq for e in actual if isinstance(e.data, dict) and e.data.get("op") == o.id
                ]
                if 0 < len(left) < len(o.args["entries"]):
                    return Violation(
                        "W4",
                        f"a call that raised {type(o.error).__name__} left {len(left)} of its "
                        f"{len(o.args['entries'])} entries (seqs {left}): a torn batch: "
                        f"{o.describe()}",
                    )
        return None

    def _explain_torn(self, actual: list[Entry], writes: list[Call]) -> Violation | None:
        """A landed batch whose entries are not where its returned seq says (W4)."""
        if [e.seq for e in actual] != list(range(1, len(actual) + 1)):
            return None  # a read with holes proves nothing about batches (W9 says it)
        for w in writes:
            if w.kind != "append" or w.args.get("key") is not None:
                continue
            seqs = [e.seq for e in actual if isinstance(e.data, dict) and e.data.get("op") == w.id]
            if len(seqs) == len(w.args["entries"]) and seqs != list(range(w.first, w.last + 1)):
                between = [e for e in actual if seqs[0] < e.seq < seqs[-1] and e.seq not in seqs]
                return Violation(
                    "W4",
                    f"the batch of op#{w.id} is torn: its entries are at seqs {seqs}, "
                    f"interleaved with {_show(between[:3])}, though it returned seq "
                    f"{w.last}:\n  {w.describe()}",
                )
        return None

    def _explain_extra(self, sid: str, extra: list[Entry], lo: int, hi: int) -> Violation | None:
        """Name the guarantee a refused or repeated call broke by leaving ``extra``."""
        for e in extra:
            op_id = e.data.get("op") if isinstance(e.data, dict) else None
            key = e.data.get("key") if isinstance(e.data, dict) else None
            if key is not None:
                return Violation(
                    "W6",
                    f"key {key!r} landed twice: seq {e.seq} repeats an earlier call with that key",
                )
            src = next((o for o in self._all_ops if o.id == op_id), None) if op_id else None
            if src is not None and src.error is not None:
                left = [
                    x.seq for x in extra if isinstance(x.data, dict) and x.data.get("op") == src.id
                ]
                if len(left) < len(src.args["entries"]):
                    return Violation(
                        "W4",
                        f"a call that raised {type(src.error).__name__} left {len(left)} of its "
                        f"{len(src.args['entries'])} entries (seqs {left}): a torn batch: "
                        f"{src.describe()}",
                    )
            if src is not None and isinstance(src.error, Fenced):
                return Violation(
                    "W2", f"a refused (Fenced) call left entry seq {e.seq}: {src.describe()}"
                )
            if src is not None and isinstance(src.error, Conflict):
                return Violation(
                    "W5", f"a refused (Conflict) call left entry seq {e.seq}: {src.describe()}"
                )
        return None

    @property
    def _all_ops(self) -> list[Call]:
        return self._history

    def _check_full(self, sid: str, ops: list[Call]) -> None:
        actual = self._read_all(sid)
        want = self.models[sid].read(0, 10**9)
        if _same(actual, want):
            return
        if len(actual) > len(want):
            extra = actual[len(want) :]
            raise self._explain_extra(sid, extra, len(want) + 1, len(actual)) or Violation(
                "W4",
                f"the log holds {len(actual)} entries, acknowledged calls wrote {len(want)}: "
                f"extra {_show(extra[:3])}",
            )
        seqs = [e.seq for e in actual]
        if seqs != list(range(1, len(seqs) + 1)):
            raise Violation("W9", f"a full read of {sid!r} has holes: seqs {seqs[:30]}")
        if len(actual) < len(want) and _same(actual, want[: len(actual)]):
            time.sleep(0.5)
            again = self._read_all(sid)
            if _same(again, want):
                raise Violation(
                    "W9",
                    f"acknowledged entries {len(actual) + 1}..{len(want)} of {sid!r} were not "
                    "readable right after their append returned, and appeared later",
                )
        for i, (seq, me) in enumerate(want):
            got = actual[i] if i < len(actual) else None
            if got is None:
                raise Violation(
                    "W4",
                    f"acknowledged entry seq {seq} ({me.kind}) is missing: "
                    f"the log ends at {len(actual)}",
                )
            if not _same([got], [(seq, me)]):
                raise Violation(
                    "W4",
                    f"entry seq {seq} was changed or moved: stored {_show([got])}, written "
                    f"kind={me.kind!r} data={me.data!r} epoch={me.epoch}",
                )
        raise Violation("W4", "the log differs from the acknowledged writes")  # pragma: no cover


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _key(e: Entry) -> tuple[int, str, Any, int | None]:
    return (e.seq, e.kind, e.data, e.epoch)


def _same(got: object, want: list[tuple[int, MEntry]]) -> bool:
    if not isinstance(got, list) or len(got) != len(want):
        return False
    for g, (seq, m) in zip(got, want, strict=True):
        if not isinstance(g, Entry) or _key(g) != (seq, m.kind, m.data, m.epoch):
            return False
    return True


def _show(entries: list[Entry]) -> str:
    return ", ".join(f"seq {e.seq} {e.kind!r} {e.data!r} epoch={e.epoch}" for e in entries)


def _guarantee_of(op: Call) -> str:
    if op.kind == "acquire":
        return "W1"
    if op.kind == "read":
        return "W9"
    if op.args.get("fence") is not None:
        return "W2"
    if op.args.get("expect") is not None:
        return "W5"
    return "W3"


def _wrong_landing(pred: object, w: Call, m: SessionModel) -> Violation:
    if isinstance(pred, FencedOut):
        if pred.after_delete:
            return Violation(
                "W14", f"a fence acquired before delete() was accepted: {w.describe()}"
            )
        return Violation(
            "W2", f"a stale fence was accepted (newest epoch is {pred.newest}): {w.describe()}"
        )
    if isinstance(pred, Conflicted):
        return Violation(
            "W5",
            f"expect did not match the last seq {pred.last}, yet the call landed: {w.describe()}",
        )
    if isinstance(pred, Repeat):
        return Violation(
            "W6",
            f"the key already landed at seq {pred.seq}, yet the call wrote again: {w.describe()}",
        )
    return Violation("W4", f"unexpected landing: {w.describe()}")


def _partial_batch(op: Call, writes: list[Call]) -> Violation | None:
    """``op`` saw the log end inside another call's batch: a batch seen half-landed (W4)."""
    if isinstance(op.error, Conflict):
        seen = op.error.last
    elif op.kind == "read" and op.error is None and len(op.result) < op.args["limit"]:
        seen = op.result[-1].seq if op.result else op.args["after"]
    else:
        return None
    for w in writes:
        if w is not op and w.first <= seen < w.last:
            return Violation(
                "W4",
                f"a call saw the log end at seq {seen}, inside the batch {w.first}..{w.last} of "
                f"another call (half of a batch was visible):\n  {op.describe()}\n  {w.describe()}",
            )
    return None


def _wrong_outcome(op: Call, snaps: list[SessionModel], writes: list[Call]) -> Violation:
    context = ""
    if writes:
        context = "\n  concurrent writes:\n    " + "\n    ".join(w.describe() for w in writes)
    m = snaps[-1]
    if op.kind == "read":
        want = [s for s, _ in m.read(op.args["after"], op.args["limit"])]
        return Violation(
            "W9",
            f"read shows what the log never held at any moment of the call (the log then held "
            f"seqs 1..{m.last}; expected seqs {want}): {op.describe()}{context}",
        )
    if op.kind == "acquire":
        return Violation("W1", f"acquire failed: {op.describe()}")
    e = op.error
    pred = m.predict_append(
        len(op.args["entries"]),
        fence=None if op.args.get("fence") is None else (op.args["era"], op.args["fence"].epoch),
        expect=op.args.get("expect"),
        key=op.args.get("key"),
    )
    if op.args.get("key") is not None and any(
        isinstance(sn.predict_append(1, fence=None, expect=None, key=op.args["key"]), Repeat)
        for sn in snaps
    ):
        return Violation(
            "W6",
            f"a repeat of key {op.args['key']!r}, which already landed, did not return its "
            f"seq: {op.describe()}{context}",
        )
    if e is None:
        return Violation(
            "W6",
            f"a repeat of key {op.args.get('key')!r} returned {op.result}, "
            f"the first call with that key landed at {getattr(pred, 'seq', '?')}: "
            f"{op.describe()}{context}",
        )
    if isinstance(e, Fenced):
        if op.args.get("fence") is None:
            return Violation("W3", f"an unfenced append was refused: {op.describe()}")
        return Violation("W2", f"the newest fence was refused: {op.describe()}{context}")
    if isinstance(e, Conflict):
        if op.args.get("expect") is None:
            return Violation("W3", f"an append without expect raised Conflict: {op.describe()}")
        return Violation(
            "W5",
            f"Conflict(last={e.last}) but the log's last seq was {m.last}: "
            f"{op.describe()}{context}",
        )
    if isinstance(e, WorldError) and op.args.get("key") is not None and isinstance(pred, Repeat):
        return Violation("W6", f"a repeat of a landed key raised {e!r}: {op.describe()}")
    return Violation(_guarantee_of(op), f"unexpected {type(e).__name__}: {op.describe()}{context}")
