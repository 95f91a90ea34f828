"""Histories of concurrent world operations: recording them, and reading them back.

Tier 2 of the kit (:mod:`fxworld_conformance.procs`) lets real OS processes (or
concurrent tasks) race on shared sessions while it kills, freezes and cuts them.
Every operation is recorded as an :class:`Op`: who (``process``), what (``op``,
``session``, ``args``), when (``start`` and ``end`` on the wall clock) and how it
ended (``outcome``):

``ok``
    the call returned; ``result`` holds what it returned.
``failed``
    the world refused it with a definite error (``Fenced``, ``Conflict``,
    ``LeaseLost``, bad input): by contract nothing of it was written.
``indeterminate``
    the call may or may not have taken effect: the connection was cut, the kit's
    timeout fired, the world raised ``BackendUnavailable``, or the process was
    killed before it could record the end (then ``end`` is ``None``).

Every batch the kit appends is tagged: each entry's data carries ``b`` (the id of
the call that wrote it, the *batch id*; a keyed retry reuses the first call's id),
``i`` (its index in the batch) and ``n`` (the batch's size). After the run the kit
reads every session's whole log (the *final read*) and the checkers compare
it with what every process saw and was told. A checker returns a list of
:class:`Finding`; each names the guarantee (W-number) it proves broken and
carries the operations that prove it.

Processes write their records as JSON lines (one line when an operation starts,
one when it ends) with one ``write`` each, so a ``SIGKILL`` loses at most the end
of the operation in flight, which then reads back as indeterminate.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from fxworld.errors import (
    Conflict,
    Fenced,
    LeaseLost,
    WorldError,
)
from fxworld.types import Fence, NewEntry, WakeLease

__all__ = [
    "Outcome",
    "Op",
    "History",
    "Finding",
    "Recorder",
    "FileSink",
    "ListSink",
    "load_records",
    "entry_dict",
    "entry_dicts",
    "fence_dict",
    "lease_dict",
    "batch_entries",
    "entry_tag",
]

Outcome = Literal["ok", "failed", "indeterminate"]

CLOCK_TOLERANCE = 0.2
"""Seconds of slack allowed between the world's clock (a server's) and the kit's."""

CONTEXT = 16
"""Operations of a finding's session that its report shows before it, at most."""

EntryDict = dict[str, Any]
"""An entry as the kit stores it: ``seq``, ``kind``, ``data``, ``epoch``."""


@dataclass
class Op:
    """One operation of one process, as recorded."""

    id: str
    process: str
    op: str
    session: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    start: float = 0.0
    end: float | None = None
    """Wall-clock time the call returned; ``None`` if it never did (killed)."""
    outcome: Outcome = "indeterminate"
    result: Any = None
    error: str | None = None
    """The error's type name (``Fenced``, ``BackendUnavailable``, ...)."""
    typed: bool = True
    """False when the error was not a :class:`~fxworld.errors.WorldError` (W16)."""

    @property
    def done(self) -> float:
        """When the call ended, or +infinity if it never did."""
        return self.end if self.end is not None else math.inf

    @property
    def tag(self) -> str | None:
        """The batch id an append's entries carry."""
        tag = self.args.get("tag")
        return tag if isinstance(tag, str) else None

    @property
    def fence(self) -> int | None:
        """The epoch of the fence an append was given, if any."""
        fence = self.args.get("fence")
        return fence if isinstance(fence, int) else None

    def describe(self, t0: float = 0.0) -> str:
        args = ", ".join(f"{k}={_short(v)}" for k, v in self.args.items() if v is not None)
        where = f"{self.session}: " if self.session else ""
        end = f"{self.end - t0:8.3f}" if self.end is not None else "   never"
        if self.outcome == "ok":
            shown = _result_text(self, t0)
            outcome = f"ok -> {shown}" if shown else "ok"
        else:
            outcome = f"{self.outcome}" + (f" ({self.error})" if self.error else "")
        return (
            f"[{self.start - t0:8.3f} .. {end}] {self.process:<14} {self.op}({where}{args})"
            f" {outcome}  #{self.id}"
        )


@dataclass
class History:
    """All operations of one run, and each session's log as finally read."""

    ops: list[Op]
    final: dict[str, list[EntryDict]]
    """Session id -> its whole log, read after every process stopped."""
    t0: float = 0.0
    """The run's start: times are printed relative to it."""
    drained: bool = False
    """True when, after the run, the kit waited for every lease and due time and
    took every wake left: only then can a wake be called lost."""
    landed_before_retries: set[str] | None = None
    """Batch ids of interrupted appends already in the log before the kit retried
    them (``None``: the kit retried nothing). Only these landed by their own call."""

    def __post_init__(self) -> None:
        self.by_id = {op.id: op for op in self.ops}
        self._positions: dict[str, dict[str, list[EntryDict]]] | None = None

    def positions(self, session: str) -> dict[str, list[EntryDict]]:
        """Batch id -> the final-log entries carrying it, in log order."""
        if self._positions is None:
            self._positions = {}
            for sid, log in self.final.items():
                found: dict[str, list[EntryDict]] = defaultdict(list)
                for entry in log:
                    tag = entry_tag(entry)
                    if tag is not None:
                        found[tag].append(entry)
                self._positions[sid] = dict(found)
        return self._positions.get(session, {})

    def appends(self) -> list[Op]:
        return [op for op in self.ops if op.op == "append" and op.tag is not None]

    def observations(self) -> list[Op]:
        """Reads and follows that returned entries (follows keep what they saw even
        when the connection then failed)."""
        return [
            op
            for op in self.ops
            if op.op in ("read", "follow") and isinstance(op.result, list) and op.session
        ]


@dataclass
class Finding:
    """What a history checker found: a broken guarantee and the operations that
    prove it. (A directed check or a state machine raises
    :class:`~fxworld_conformance.model.Violation` instead.)"""

    guarantee: str
    message: str
    ops: list[Op] = field(default_factory=list)
    entries: list[EntryDict] = field(default_factory=list)
    """Final-log entries that show it, when the log is part of the proof."""

    def render(self, t0: float = 0.0, history: History | None = None) -> str:
        """The guarantee, the message and the operations that prove it; with the
        run's ``history``, also the wake history of the finding's session up to
        then (:meth:`wake_context`)."""
        lines = [f"{self.guarantee}: {self.message}"]
        seen: set[str] = set()
        for op in sorted(self.ops, key=lambda o: (o.start, o.id)):
            if op.id not in seen:
                seen.add(op.id)
                lines.append("    " + op.describe(t0))
        if self.entries:
            lines.append("  final log:")
            lines.extend("    " + _entry_text(e) for e in self.entries)
        if history is not None:
            lines.extend(self.wake_context(history, t0))
        return "\n".join(lines)

    def wake_context(self, h: History, t0: float = 0.0) -> list[str]:
        """When the finding is about one session's wake: every wake request
        (``wake``, ``append`` with ``wake=``), take, renewal and finish of that
        session that started before the finding's last operation ended, the last
        :data:`CONTEXT` of them, in order, with times and results (``*``: an
        operation of the finding), unless the finding shows them all. A renewal or
        finish names the take of its lease."""
        sessions = {op.session for op in self.ops if op.session}
        if len(sessions) != 1 or not any(_about_wakes(op) for op in self.ops):
            return []
        sid = sessions.pop()
        until = max(op.done if math.isfinite(op.done) else op.start for op in self.ops)
        mine = {op.id for op in self.ops}
        ops = sorted(
            (op for op in h.ops if op.session == sid and _about_wakes(op) and op.start <= until),
            key=lambda o: (o.start, o.id),
        )
        if all(op.id in mine for op in ops):
            return []  # nothing the finding does not show
        takes = {
            str(op.result["token"]): op.id
            for op in ops
            if op.op == "take_wake" and isinstance(op.result, dict) and "token" in op.result
        }
        lines = [f"  session {sid}'s wake requests, takes, renewals and finishes up to then:"]
        if len(ops) > CONTEXT:
            lines.append(f"    ({len(ops) - CONTEXT} earlier not shown)")
        for op in ops[-CONTEXT:]:
            lease = takes.get(str(op.args.get("token"))) if op.op != "take_wake" else None
            shown = op.describe(t0) + (f"  (lease of #{lease})" if lease else "")
            lines.append(("  * " if op.id in mine else "    ") + shown)
        return lines


# -- recording ------------------------------------------------------------------------


class FileSink:
    """Appends records as JSON lines to a file, one ``os.write`` per record, so a
    killed process leaves only whole lines behind."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, record: dict[str, Any]) -> None:
        os.write(self._fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class ListSink:
    """Keeps records in memory (tasks in one process)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def __call__(self, record: dict[str, Any]) -> None:
        self.records.append(record)


T = TypeVar("T")


@dataclass
class Done:
    """What :meth:`Recorder.run` gives back to the workload."""

    outcome: Outcome
    value: Any = None
    error: BaseException | None = None


class Recorder:
    """Records the operations of one process (or task) into a sink."""

    def __init__(self, process: str, sink: Callable[[dict[str, Any]], None]) -> None:
        self.process = process
        self.sink = sink
        self._n = 0

    def next_id(self) -> str:
        self._n += 1
        return f"{self.process}#{self._n}"

    async def run(
        self,
        op: str,
        session: str | None,
        args: dict[str, Any],
        call: Callable[[], Awaitable[T]],
        *,
        within: float,
        encode: Callable[[T], Any] = lambda value: value,
        op_id: str | None = None,
    ) -> Done:
        """Run ``call`` with at most ``within`` seconds, recording its start and its end.

        A cancelled call (a simulated crash) records no end, like a killed process.
        """
        op_id = self._start(op_id or self.next_id(), op, session, args, time.time())
        limit = asyncio.timeout(within)
        try:
            async with limit:
                value = await call()
        except (Fenced, Conflict, LeaseLost, ValueError) as e:
            typed = isinstance(e, WorldError)
            self._end(op_id, "failed" if typed else "indeterminate", None, e, typed)
            return Done("failed" if typed else "indeterminate", None, e)
        except TimeoutError as e:
            ours = limit.expired()  # the kit gave up; else the world leaked a TimeoutError
            self._end(op_id, "indeterminate", None, e, ours, kit_timeout=ours)
            return Done("indeterminate", None, e)
        except Exception as e:
            self._end(op_id, "indeterminate", None, e, isinstance(e, WorldError))
            return Done("indeterminate", None, e)
        self._end(op_id, "ok", encode(value), None, True)
        return Done("ok", value)

    def record(
        self,
        op: str,
        session: str | None,
        args: dict[str, Any],
        start: float,
        outcome: Outcome,
        result: Any,
        error: BaseException | None = None,
    ) -> str:
        """Record an operation that already ended (a follow connection)."""
        op_id = self._start(self.next_id(), op, session, args, start)
        typed = error is None or isinstance(error, WorldError)
        self._end(op_id, outcome, result, error, typed)
        return op_id

    def _start(
        self, op_id: str, op: str, session: str | None, args: dict[str, Any], t: float
    ) -> str:
        self.sink(
            {"e": "s", "id": op_id, "p": self.process, "op": op, "sid": session, "a": args, "t": t}
        )
        return op_id

    def _end(
        self,
        op_id: str,
        outcome: Outcome,
        result: Any,
        error: BaseException | None,
        typed: bool,
        *,
        kit_timeout: bool = False,
    ) -> None:
        record: dict[str, Any] = {"e": "e", "id": op_id, "t": time.time(), "o": outcome}
        if result is not None:
            record["r"] = result
        if error is not None:
            name = type(error).__name__
            if kit_timeout:
                name = "kit timeout"
            elif not isinstance(error, WorldError):
                name = f"{type(error).__module__}.{type(error).__qualname__}: {error}"[:300]
            record["err"] = name
            record["typed"] = typed
        self.sink(record)


def load_records(records: Iterable[dict[str, Any]]) -> list[Op]:
    """Rebuild operations from start/end records (ends may be missing)."""
    ops: dict[str, Op] = {}
    for rec in records:
        if rec.get("e") == "s":
            ops[rec["id"]] = Op(
                id=rec["id"],
                process=rec["p"],
                op=rec["op"],
                session=rec.get("sid"),
                args=rec.get("a") or {},
                start=rec["t"],
            )
        elif rec.get("e") == "e" and rec["id"] in ops:
            op = ops[rec["id"]]
            op.end = rec["t"]
            op.outcome = rec["o"]
            op.result = rec.get("r")
            op.error = rec.get("err")
            op.typed = rec.get("typed", True)
            if op.op == "take_wake" and isinstance(op.result, dict):
                op.session = op.result.get("session")
    return sorted(ops.values(), key=lambda o: (o.start, o.id))


def read_record_file(path: str) -> list[dict[str, Any]]:
    """The whole lines of a record file (a torn last line is dropped)."""
    out: list[dict[str, Any]] = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    except FileNotFoundError:
        pass
    return out


def entry_dict(entry: Any) -> EntryDict:
    """An :class:`~fxworld.types.Entry` as the kit records it."""
    return {"seq": entry.seq, "kind": entry.kind, "data": entry.data, "epoch": entry.epoch}


def entry_dicts(entries: Iterable[Any]) -> list[EntryDict]:
    """Entries as the kit records them."""
    return [entry_dict(e) for e in entries]


def fence_dict(fence: Fence) -> dict[str, int]:
    """A :class:`~fxworld.types.Fence` as the kit records it."""
    return {"epoch": fence.epoch, "seq": fence.seq}


def lease_dict(lease: WakeLease | None) -> dict[str, Any] | None:
    """A :class:`~fxworld.types.WakeLease` (or none taken) as the kit records it."""
    if lease is None:
        return None
    return {
        "session": lease.session_id,
        "token": lease.token,
        "attempt": lease.attempt,
        "expires": lease.expires_at.timestamp(),
    }


def batch_entries(kind: str, tag: str, n: int, process: str) -> list[NewEntry]:
    """``n`` entries of one batch, marked so that the checkers can tell whether it
    landed whole: ``b`` the batch's tag, ``i`` the place in it, ``n`` its size,
    ``p`` the process that wrote it."""
    return [NewEntry(kind, {"b": tag, "i": i, "n": n, "p": process}) for i in range(n)]


# -- helpers --------------------------------------------------------------------------


def _about_wakes(op: Op) -> bool:
    """A wake request, take, renewal or finish."""
    if op.op == "append":
        return op.args.get("wake") is not None
    return op.op in ("wake", "take_wake", "renew_wake", "finish_wake")


def _short(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":")) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:37] + "..."


def _result_text(op: Op, t0: float = 0.0) -> str:
    r = op.result
    if isinstance(r, list):
        if not r:
            return "[]"
        return f"{len(r)} entries seq {r[0].get('seq')}..{r[-1].get('seq')}"
    if isinstance(r, dict):
        shown = {
            k: (round(v - t0, 3) if k == "expires" and isinstance(v, float) else v)
            for k, v in r.items()
            if k != "token"
        }
        return ", ".join(f"{k}={_short(v)}" for k, v in shown.items()) or "{}"
    return "" if r is None else _short(r)


def _entry_text(e: EntryDict) -> str:
    data = e.get("data") or {}
    if isinstance(data, dict) and "b" in data:
        what = f"batch {data['b']} [{data.get('i')}/{data.get('n')}]"
    else:
        what = _short(data)
    return f"seq {e.get('seq')}: {e.get('kind')} epoch={e.get('epoch')} {what}"


def entry_tag(entry: EntryDict) -> str | None:
    """The batch id an entry the kit wrote carries (``None`` for others)."""
    data = entry.get("data")
    if isinstance(data, dict):
        tag = data.get("b")
        if isinstance(tag, str):
            return tag
    return None


def _content(entry: EntryDict) -> str:
    return json.dumps([entry.get("kind"), entry.get("data"), entry.get("epoch")], sort_keys=True)
