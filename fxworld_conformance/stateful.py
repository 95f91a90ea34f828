"""Tier 1: Hypothesis state machines drive a World beside the reference model.

Several logical writers, readers, followers and wake workers act on a few
sessions. Log operations (acquire, append, read) are split into *start* and
*complete*, so Hypothesis chooses how concurrent calls interleave on the
machine's event loop; when no call is in flight the machine checks the whole
group linearizably, one session at a time:

* every acknowledged write names its positions (the seq it returned), so the
  writes are ordered by position; they must be dense, not overlap, respect
  real-time order, and each must be what the model predicts at its point (W1,
  W2, W4, W5, W6, W8, W14);
* every other outcome (a read, ``Fenced``, ``Conflict``, a keyed repeat) must
  match the model at *some* point between the writes that finished before it
  started and those that started after it finished (W2, W3, W5, W6, W9);
* then a full read must equal the model's log (W4), and each follower must have
  yielded exactly the log after its cursor, within a bounded delay (W10).

Wake operations (wake, append with ``wake=``, take, renew, finish, lease expiry,
delete) run one at a time and are predicted exactly (W7, W11-W14). A failure
raises :class:`~fxworld_conformance.model.Violation` naming the guarantee;
Hypothesis shrinks it and prints the steps that replay it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.reporting import with_reporter
from hypothesis.stateful import (
    RuleBasedStateMachine,
    get_state_machine_test,
    precondition,
    rule,
)

from fxworld import World
from fxworld.errors import Conflict, Fenced, LeaseLost, WorldError
from fxworld.types import Entry, Fence, NewEntry, WakeLease
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
from fxworld_conformance.profiles import profile as kit_profile
from fxworld_conformance.report import CheckResult, kit_error
from fxworld_conformance.target import CALL_TIMEOUT, Target, call_world

__all__ = ["LogMachine", "WakeMachine", "Stats", "run_machine", "machine_settings", "MACHINES"]

T = TypeVar("T")

SESSIONS = ("s1", "Ab.c:d-2_z")
WRITERS = ("w1", "w2", "w3")
READERS = ("r1", "r2")
WORKERS = ("k1", "k2")
WAKE_SESSIONS = (SESSIONS[0], SESSIONS[0], SESSIONS[1])  # weighted: more re-wakes of one
KINDS = ("message", "tool started", "tool finished", "note ✓")
KEYS = ("key-a", "key-b")
LONG_LEASE = 120.0
SHORT_LEASE = 0.12
LATER_DELAY = 3600.0
FOLLOW_TIMEOUT = 5.0
MAX_INFLIGHT = 4


@dataclass
class Stats:
    """What a run did: Hypothesis examples (machines built) and world operations."""

    examples: int = 0
    operations: int = 0
    groups: int = 0
    """Groups of log calls checked together for linearizability."""
    overlapping: int = 0
    """Of those, groups where two or more calls were in flight at once."""


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


@dataclass
class Follower:
    sid: str
    after: int
    got: list[Entry] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    error: BaseException | None = None
    cursor: int = 0


class _KitMachine(RuleBasedStateMachine):
    """The shared engine: one event loop, one fresh world, the model, the op log."""

    target: ClassVar[Target]
    stats: ClassVar[Stats]

    def __init__(self) -> None:
        super().__init__()
        self.stats.examples += 1
        self.loop = asyncio.new_event_loop()
        self.world: World = self.loop.run_until_complete(
            asyncio.wait_for(self.target.open(), CALL_TIMEOUT)
        )
        self.models = {sid: SessionModel() for sid in SESSIONS}
        self.wakes = WakeModel()
        self.inflight: list[Call] = []
        self.group: list[Call] = []
        self.tick = 0
        self.next_op = 0
        self.fences: dict[tuple[str, str], tuple[int, Fence]] = {}
        self.seen_last = dict.fromkeys(SESSIONS, 0)
        self.followers: dict[str, Follower] = {}
        self._history: list[Call] = []

    # -- plumbing ------------------------------------------------------------------

    def run(self, coro: Awaitable[T], what: str, guarantee: str) -> T:
        """Run one world call to completion (liveness: within CALL_TIMEOUT)."""
        self.stats.operations += 1
        return self.loop.run_until_complete(call_world(coro, what, guarantee))

    def teardown(self) -> None:
        try:
            for f in list(self.followers.values()):
                with contextlib.suppress(Violation):
                    self._stop_follower(f)
            for op in self.inflight:
                if op.task is not None:
                    with contextlib.suppress(Violation):
                        self._cancel(op.task)
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(asyncio.wait_for(self.world.close(), CALL_TIMEOUT))
        finally:
            self.loop.close()

    def _start(self, kind: str, sid: str, actor: str, args: dict[str, Any]) -> Call:
        self.tick += 1
        self.next_op += 1
        op = Call(self.next_op, kind, sid, actor, self.tick, args)
        self.stats.operations += 1
        self.inflight.append(op)
        op.task = self.loop.create_task(self._exec(op))
        return op

    async def _exec(self, op: Call) -> None:
        a = op.args
        try:
            if op.kind == "acquire":
                call: Coroutine[Any, Any, Any] = self.world.acquire(op.sid)
            elif op.kind == "read":
                call = self.world.read(op.sid, a["after"], limit=a["limit"])
            else:
                call = self.world.append(
                    op.sid,
                    [NewEntry(k, d) for k, d in a["entries"]],
                    fence=a.get("fence"),
                    expect=a.get("expect"),
                    key=a.get("key"),
                    wake=a.get("wake"),
                )
            op.result = await asyncio.wait_for(call, CALL_TIMEOUT)
        except Exception as e:
            op.error = e
        finally:
            op.end = self.tick + 0.5

    def _complete(self, op: Call) -> None:
        assert op.task is not None
        if not op.task.done():
            self.loop.run_until_complete(asyncio.wait({op.task}))
        self.inflight.remove(op)
        self.group.append(op)
        self._check_now(op)
        if not self.inflight:
            self._settle()

    def _complete_all(self) -> None:
        while self.inflight:
            self._complete(self.inflight[0])

    def _exclusive(self, kind: str, sid: str, actor: str, args: dict[str, Any]) -> Call:
        """Start and complete one log operation with nothing else in flight."""
        assert not self.inflight
        op = self._start(kind, sid, actor, args)
        self._complete(op)
        return op

    def _start_append(
        self,
        writer: str,
        sid: str,
        fenced: bool,
        n: int,
        expect: str,
        key: str | None,
        wake: float | None,
    ) -> Call:
        if key is not None and any(
            o.sid == sid and o.args.get("key") == key for o in self.inflight
        ):
            key = None  # one call per key in flight: a client retries after a timeout
        held = self.fences.get((writer, sid)) if fenced else None
        args: dict[str, Any] = {"fence": None, "era": self.models[sid].era}
        if held is not None:
            args["era"], args["fence"] = held
        op_id = self.next_op + 1
        if key is not None:
            entries = [
                ("prompt", {"key": key, "i": i, "text": "héllo\u0000 ✓"})
                for i in range(1 + KEYS.index(key))
            ]
        else:
            entries = [
                (
                    KINDS[(op_id + i) % len(KINDS)],
                    {"op": op_id, "i": i, "by": writer, "n": [1.5, None, True]},
                )
                for i in range(n)
            ]
        args["entries"] = entries
        if expect == "last":
            args["expect"] = self.seen_last[sid]
        elif expect == "off":
            args["expect"] = self.seen_last[sid] + 1
        args["key"] = key
        args["wake"] = wake
        return self._start("append", sid, writer, args)

    # -- immediate checks of one completed op ---------------------------------------

    def _check_now(self, op: Call) -> None:
        e = op.error
        if isinstance(e, TimeoutError):
            raise Violation(
                _guarantee_of(op), f"did not return in {CALL_TIMEOUT:g} s: {op.describe()}"
            )
        if e is not None and not isinstance(e, WorldError):
            raise Violation("W16", f"a non-fxworld exception escaped: {op.describe()}")
        if op.kind == "append" and e is None and not _is_int(op.result):
            raise Violation("W4", f"append returned {op.result!r}, not a seq: {op.describe()}")
        if op.kind == "acquire" and e is None:
            f = op.result
            if not isinstance(f, Fence) or f.session_id != op.sid or not _is_int(f.epoch):
                raise Violation("W1", f"acquire returned {f!r}: {op.describe()}")
        if op.kind == "read" and e is None:
            self._check_read_shape(op)
        if e is None and op.kind in ("append", "acquire"):
            seq = op.result.seq if op.kind == "acquire" else op.result
            self.seen_last[op.sid] = max(self.seen_last[op.sid], seq)

    def _check_read_shape(self, op: Call) -> None:
        got = op.result
        if not isinstance(got, list) or not all(isinstance(x, Entry) for x in got):
            raise Violation("W9", f"read returned {type(got).__name__}, not a list of Entry")
        after, limit = op.args["after"], op.args["limit"]
        seqs = [x.seq for x in got]
        if len(got) > limit:
            raise Violation(
                "W9", f"read returned {len(got)} entries, over limit={limit}: {op.describe()}"
            )
        if seqs != list(range(after + 1, after + 1 + len(seqs))):
            raise Violation(
                "W9",
                f"read(after={after}) is not a contiguous slice from {after + 1} "
                f"(a hole, a skipped or repeated entry): {op.describe()}",
            )
        for x in got:
            if x.session_id != op.sid:
                raise Violation("W9", f"read of {op.sid!r} returned an entry of {x.session_id!r}")
            if not isinstance(x.at, datetime) or x.at.utcoffset() is None:
                raise Violation("W9", f"entry {x.seq} has a naive or missing time {x.at!r}")
        if seqs:
            self.seen_last[op.sid] = max(self.seen_last[op.sid], seqs[-1])

    # -- the linearizability check at quiescence -------------------------------------

    def _settle(self) -> None:
        ops, self.group = self.group, []
        self.stats.groups += 1
        if len(ops) > 1:
            self.stats.overlapping += 1
        for sid in SESSIONS:
            mine = [o for o in ops if o.sid == sid]
            if mine:
                self._history = mine
                try:
                    self._linearize(sid, mine)
                    self._check_full(sid, mine)
                except Violation as v:
                    # a torn batch explains every other symptom: name it first (W4)
                    torn = None if v.guarantee == "W4" else self._torn_in(sid, mine)
                    raise (torn or v) from None
        for f in list(self.followers.values()):
            self._check_follower(f)

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

    def _read_all(self, sid: str) -> list[Entry]:
        out: list[Entry] = []
        while True:
            cursor = out[-1].seq if out else 0
            page = self.run(self.world.read(sid, cursor, limit=1000), f"read({sid!r})", "W9")
            if not page or not all(isinstance(e, Entry) for e in page):
                return out
            out.extend(page)
            if len(out) > 100_000:
                return out

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

    # -- followers -------------------------------------------------------------------

    def _start_follower(self, sid: str, after: int, got: list[Entry] | None = None) -> None:
        f = Follower(sid, after, got if got is not None else [], cursor=after)
        try:
            it = self.world.follow(sid, after)
        except Exception as e:
            raise Violation(
                "W10" if isinstance(e, WorldError) else "W16",
                f"follow({sid!r}, {after}) raised {e!r}",
            ) from e

        async def pump() -> None:
            try:
                async for entry in it:
                    f.got.append(entry)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                f.error = e
            finally:
                with contextlib.suppress(Exception):
                    await it.aclose()  # type: ignore[attr-defined]

        f.task = self.loop.create_task(pump())
        self.followers[sid] = f
        self.stats.operations += 1

    def _stop_follower(self, f: Follower) -> None:
        if f.task is not None:
            self._cancel(f.task)
        self.followers.pop(f.sid, None)

    def _cancel(self, task: asyncio.Task[None]) -> None:
        """Cancel ``task`` and wait for it; cancel again if a wait_for swallowed it."""
        for _ in range(100):
            if task.done():
                return
            task.cancel()
            self.loop.run_until_complete(asyncio.wait({task}, timeout=0.2))
        raise Violation("W10", "a follow() iterator ignored cancellation for 20 s")

    def _check_follower(self, f: Follower) -> None:
        want = self.models[f.sid].read(f.after, 10**9)

        async def wait() -> None:
            deadline = time.monotonic() + FOLLOW_TIMEOUT
            while len(f.got) < len(want) and f.error is None and time.monotonic() < deadline:
                if not _same(f.got, want[: len(f.got)]):
                    break  # already wrong: no need to wait for the rest
                await asyncio.sleep(0.01)
            await asyncio.sleep(0)

        self.loop.run_until_complete(wait())
        if f.error is not None:
            raise Violation(
                "W10" if isinstance(f.error, WorldError) else "W16",
                f"follow({f.sid!r}, after={f.after}) raised {f.error!r}",
            )
        if len(f.got) < len(want) and _same(f.got, want[: len(f.got)]):
            raise Violation(
                "W10",
                f"follow({f.sid!r}, after={f.after}) yielded {len(f.got)} of {len(want)} committed "
                f"entries within {FOLLOW_TIMEOUT:g} s (last yielded seq "
                f"{f.got[-1].seq if f.got else f.after})",
            )
        if not _same(f.got, want):
            raise Violation(
                "W10",
                f"follow({f.sid!r}, after={f.after}) yielded seqs {[e.seq for e in f.got][:20]}, "
                f"the log after {f.after} is seqs {[s for s, _ in want][:20]} "
                "(a gap, a duplicate or a changed entry)",
            )


class LogMachine(_KitMachine):
    """Concurrent writers, readers and followers on the log (W1-W6, W8-W10, W14)."""

    @precondition(lambda self: len(self.inflight) < MAX_INFLIGHT)
    @rule(writer=st.sampled_from(WRITERS), sid=st.sampled_from(SESSIONS))
    def start_acquire(self, writer: str, sid: str) -> None:
        op = self._start("acquire", sid, writer, {})
        op.args["writer"] = writer

    @precondition(lambda self: len(self.inflight) < MAX_INFLIGHT)
    @rule(
        writer=st.sampled_from(WRITERS),
        sid=st.sampled_from(SESSIONS),
        fenced=st.booleans(),
        n=st.integers(1, 3),
        expect=st.sampled_from(["none", "last", "none", "off"]),
        key=st.sampled_from([None, None, *KEYS]),
    )
    def start_append(
        self, writer: str, sid: str, fenced: bool, n: int, expect: str, key: str | None
    ) -> None:
        self._start_append(writer, sid, fenced, n, expect, key, wake=None)

    @precondition(lambda self: len(self.inflight) < MAX_INFLIGHT)
    @rule(
        reader=st.sampled_from(READERS),
        sid=st.sampled_from(SESSIONS),
        after=st.integers(0, 6),
        limit=st.sampled_from([1000, 1, 2, 3]),
    )
    def start_read(self, reader: str, sid: str, after: int, limit: int) -> None:
        self._start("read", sid, reader, {"after": after, "limit": limit})

    @precondition(lambda self: bool(self.inflight))
    @rule()
    def step(self) -> None:
        """Let every started call advance one step on the event loop."""
        self.loop.run_until_complete(asyncio.sleep(0))

    @precondition(lambda self: bool(self.inflight))
    @rule(i=st.integers(0, MAX_INFLIGHT - 1))
    def complete(self, i: int) -> None:
        op = self.inflight[i % len(self.inflight)]
        self._complete(op)
        self._took_fence(op)

    @precondition(lambda self: bool(self.inflight))
    @rule()
    def complete_all(self) -> None:
        done = list(self.inflight)
        self._complete_all()
        for op in done:
            self._took_fence(op)

    def _took_fence(self, op: Call) -> None:
        if op.kind == "acquire" and op.error is None:
            self.fences[(op.actor, op.sid)] = (self.models[op.sid].era, op.result)

    @precondition(lambda self: not self.inflight)
    @rule(sid=st.sampled_from(SESSIONS))
    def delete(self, sid: str) -> None:
        f = self.followers.get(sid)
        if f is not None:
            self._check_follower(f)
            self._stop_follower(f)
        self.run(self.world.delete(sid), f"delete({sid!r})", "W14")
        self.models[sid].apply_delete()
        self.wakes.delete(sid)
        self.seen_last[sid] = 0
        got = self.run(self.world.read(sid, 0), f"read({sid!r}) after delete", "W14")
        if got:
            raise Violation("W14", f"after delete({sid!r}) the log still reads {_show(got[:3])}")

    @precondition(lambda self: len(self.followers) < len(SESSIONS))
    @rule(sid=st.sampled_from(SESSIONS), after=st.integers(0, 3))
    def start_follow(self, sid: str, after: int) -> None:
        if sid in self.followers:
            return
        self._start_follower(sid, after)

    @precondition(lambda self: bool(self.followers))
    @rule(sid=st.sampled_from(SESSIONS))
    def reconnect_follow(self, sid: str) -> None:
        """Drop a follower and reconnect from the last seq it saw (W10)."""
        f = self.followers.get(sid)
        if f is None:
            return
        self._stop_follower(f)
        last = f.got[-1].seq if f.got else f.after
        self._start_follower(sid, last, got=f.got)
        self.followers[sid].after = f.after


class WakeMachine(_KitMachine):
    """Wakes, leases and finishes, with appends that carry ``wake=`` (W7, W11-W14)."""

    def __init__(self) -> None:
        super().__init__()
        self.leases: list[tuple[str, WakeLease, float]] = []  # worker, lease, local expiry

    @precondition(lambda self: not self.wakes.uncertain())
    @rule(writer=st.sampled_from(WRITERS), sid=st.sampled_from(WAKE_SESSIONS))
    def acquire(self, writer: str, sid: str) -> None:
        op = self._exclusive("acquire", sid, writer, {})
        if op.error is None:
            self.fences[(writer, sid)] = (self.models[sid].era, op.result)

    @precondition(lambda self: not self.wakes.uncertain())
    @rule(
        writer=st.sampled_from(WRITERS),
        sid=st.sampled_from(WAKE_SESSIONS),
        fenced=st.booleans(),
        later=st.booleans(),
        expect=st.sampled_from(["none", "last", "off"]),
    )
    def append_with_wake(
        self, writer: str, sid: str, fenced: bool, later: bool, expect: str
    ) -> None:
        self._start_append(writer, sid, fenced, 1, expect, None, wake=LATER_DELAY if later else 0.0)
        self._complete(self.inflight[0])

    @precondition(lambda self: not self.wakes.uncertain())
    @rule(sid=st.sampled_from(WAKE_SESSIONS), later=st.booleans())
    def wake(self, sid: str, later: bool) -> None:
        delay = LATER_DELAY if later else 0.0
        self.run(self.world.wake(sid, delay=delay), f"wake({sid!r}, delay={delay:g})", "W11")
        self.wakes.wake(sid, LATER if later else NOW)

    @precondition(lambda self: bool(self.leases) and not self.wakes.uncertain())
    @rule(i=st.integers(0, 7), later=st.booleans())
    def rewake_leased(self, i: int, later: bool) -> None:
        """A new request for a session whose wake a worker holds (W13)."""
        sid = self.leases[self._pick(i, live=True)][1].session_id
        self.wake(sid, later)

    @precondition(lambda self: not self.wakes.uncertain())
    @rule(worker=st.sampled_from(WORKERS), later=st.booleans())
    def take_rewake_finish_take(self, worker: str, later: bool) -> None:
        """One worker's whole cycle with a request arriving mid-run (W12, W13): take a
        due wake, wake its session again, finish, and take again."""
        before = len(self.leases)
        self.take(worker, short=False)
        if len(self.leases) == before:
            return  # nothing was due
        sid = self.leases[-1][1].session_id
        self.wake(sid, later)
        self.finish(len(self.leases) - 1, live=False)
        self.take(worker, short=False)

    def _pick(self, i: int, *, live: bool) -> int:
        """Index of a lease: the i-th live one if ``live`` and there is one, else any."""
        if live:
            held = [
                j
                for j, (_, lease, _) in enumerate(self.leases)
                if self.wakes.held(lease.session_id, lease.token)
            ]
            if held:
                return held[i % len(held)]
        return i % len(self.leases)

    @precondition(lambda self: not self.wakes.uncertain())
    @rule(worker=st.sampled_from(WORKERS), short=st.sampled_from([False, False, False, True]))
    def take(self, worker: str, short: bool) -> None:
        lease = SHORT_LEASE if short else LONG_LEASE
        can = self.wakes.deliverable()
        before = self.wakes.describe()
        got = self.run(self.world.take_wake(lease=lease), f"take_wake(lease={lease:g})", "W12")
        local_expiry = time.monotonic() + lease
        if got is None:
            if can:
                sid = sorted(can)[0]
                raise Violation(
                    self.wakes.why_due(sid),
                    f"take_wake returned None, but a wake of {sid!r} is due ({before})",
                )
            return
        if not isinstance(got, WakeLease) or got.session_id not in SESSIONS:
            raise Violation("W12", f"take_wake returned {got!r}")
        sid = got.session_id
        if sid not in can:
            g, why = self.wakes.why_not(sid)
            raise Violation(g, f"take_wake handed out {sid!r} but {why} ({before})")
        want = self.wakes.take(sid, got.token, short=short)
        if got.attempt != want:
            raise Violation(
                "W12",
                f"take_wake of {sid!r} gave attempt {got.attempt}, expected {want} ({before})",
            )
        if got.expires_at.utcoffset() is None:
            raise Violation("W12", f"lease expires_at {got.expires_at!r} is not timezone-aware")
        self.leases.append((worker, got, local_expiry))

    @precondition(lambda self: bool(self.leases) and not self.wakes.uncertain())
    @rule(
        i=st.integers(0, 7),
        short=st.sampled_from([False, False, False, True]),
        live=st.sampled_from([True, True, False]),
    )
    def renew(self, i: int, short: bool, live: bool) -> None:
        i = self._pick(i, live=live)
        worker, lease, _ = self.leases[i]
        live = self.wakes.held(lease.session_id, lease.token)
        n = SHORT_LEASE if short else LONG_LEASE
        try:
            new = self.run(self.world.renew_wake(lease, lease=n), "renew_wake", "W12")
        except LeaseLost:
            if live:
                raise Violation(
                    "W12", f"renew_wake of a live lease of {lease.session_id!r} raised LeaseLost"
                ) from None
            return
        if not live:
            raise Violation(
                "W12",
                f"renew_wake of a lease of {lease.session_id!r} that expired or was replaced "
                "succeeded",
            )
        if (
            not isinstance(new, WakeLease)
            or new.session_id != lease.session_id
            or new.attempt != lease.attempt
        ):
            raise Violation("W12", f"renew_wake returned {new!r} for {lease!r}")
        self.wakes.renew(lease.session_id, new.token, short=short)
        self.leases[i] = (worker, new, time.monotonic() + n)

    @precondition(lambda self: bool(self.leases) and not self.wakes.uncertain())
    @rule(i=st.integers(0, 7), live=st.sampled_from([True, True, False]))
    def finish(self, i: int, live: bool) -> None:
        _, lease, _ = self.leases[self._pick(i, live=live)]
        live = self.wakes.held(lease.session_id, lease.token)
        try:
            self.run(self.world.finish_wake(lease), "finish_wake", "W13")
        except LeaseLost:
            if live:
                raise Violation(
                    "W13", f"finish_wake of a live lease of {lease.session_id!r} raised LeaseLost"
                ) from None
            return
        if not live:
            raise Violation(
                "W12",
                f"finish_wake of a lease of {lease.session_id!r} that expired or was replaced "
                "succeeded",
            )
        self.wakes.finish(lease.session_id)

    @precondition(lambda self: self.wakes.uncertain())
    @rule()
    def let_short_leases_expire(self) -> None:
        now_local = time.monotonic()
        now_utc = datetime.now(UTC)
        wait = 0.0
        for _, lease, local in self.leases:
            if local - now_local > 2 * SHORT_LEASE + 1.0:
                continue  # a long lease: the model never lets it expire
            wait = max(wait, local - now_local, (lease.expires_at - now_utc).total_seconds())
        time.sleep(min(wait, 2 * SHORT_LEASE + 1.0) + 0.05)
        self.wakes.expire_short()

    @precondition(lambda self: not self.wakes.uncertain())
    @rule(sid=st.sampled_from(WAKE_SESSIONS))
    def delete(self, sid: str) -> None:
        self.run(self.world.delete(sid), f"delete({sid!r})", "W14")
        self.models[sid].apply_delete()
        self.wakes.delete(sid)
        self.seen_last[sid] = 0


# -- running a machine ------------------------------------------------------------------


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
            "W2",
            f"a stale fence was accepted (newest epoch is {pred.newest}): {w.describe()}",
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


MACHINES: dict[str, tuple[type[_KitMachine], tuple[str, ...]]] = {
    "stateful log": (
        LogMachine,
        ("W1", "W2", "W3", "W4", "W5", "W6", "W8", "W9", "W10", "W14"),
    ),
    "stateful wakes": (WakeMachine, ("W7", "W11", "W12", "W13", "W14")),
}
"""The tier-1 checks: name -> (machine, the guarantees it checks)."""


def machine_settings(name: str, profile: str, *, shrink: bool = True) -> settings:
    """Hypothesis settings of one machine under a kit profile (see
    :mod:`fxworld_conformance.profiles`)."""
    row = kit_profile(profile)
    examples, steps = row.machines[name]
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        derandomize=row.derandomize,
        database=None,
        print_blob=True,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.normal,
        phases=[Phase.explicit, Phase.generate, Phase.shrink]
        if shrink
        else [Phase.explicit, Phase.generate],
    )


def run_machine(
    name: str,
    target: Target,
    *,
    profile: str = "ci",
    seed: int = 0,
    shrink_seconds: float | None = None,
) -> CheckResult:
    """Run one tier-1 machine against ``target``; a failed result names the guarantee
    broken and carries the shrunk steps that replay it."""
    machine, covers = MACHINES[name]
    stats = Stats()
    bound = type(machine.__name__, (machine,), {"target": target, "stats": stats})
    s = machine_settings(name, profile, shrink=shrink_seconds != 0)
    if seed:
        s = settings(s, derandomize=False)
    test: Callable[[], None] = get_state_machine_test(bound, settings=s)  # type: ignore[no-untyped-call, unused-ignore]
    if seed:
        test = hypothesis_seed(seed)(test)
    lines: list[str] = []

    def collect(value: object) -> None:
        lines.append(str(value))

    started = time.monotonic()
    if shrink_seconds is None:
        shrink_seconds = kit_profile(profile).shrink_seconds
    try:
        with with_reporter(collect), _shrink_budget(shrink_seconds):
            test()
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        violation = _find_violation(e)
        if violation is None and not isinstance(e, (AssertionError, WorldError)):
            return kit_error(name, e, time.monotonic() - started)  # a bug of the kit's
        if violation is None:
            guarantees: tuple[str, ...] = covers
            message = f"{type(e).__name__}: {e}"
        else:
            guarantees = (violation.guarantee,)
            message = str(violation)
        notes = [n for n in getattr(e, "__notes__", []) if isinstance(n, str)]
        if violation is not None and violation is not e:
            notes += [n for n in getattr(violation, "__notes__", []) if isinstance(n, str)]
        steps = "\n".join(
            line
            for line in [*lines, *notes]
            if line.strip() and not line.startswith(("WARNING: Hypothesis has spent", "PLEASE"))
        )
        return CheckResult(
            name=name,
            guarantees=guarantees,
            status="failed",
            detail=f"{message}\n\nShrunk steps that replay it:\n{steps}",
            examples=stats.examples,
            operations=stats.operations,
            seconds=time.monotonic() - started,
            extra={"covers": list(covers)},
        )
    return CheckResult(
        name=name,
        guarantees=covers,
        status="passed",
        examples=stats.examples,
        operations=stats.operations,
        seconds=time.monotonic() - started,
        extra={"linearized_groups": stats.groups, "overlapping_groups": stats.overlapping},
    )


@contextlib.contextmanager
def _shrink_budget(seconds: float) -> Iterator[None]:
    """Bound the time Hypothesis spends shrinking a failure (its default is 300 s)."""
    from hypothesis.internal.conjecture import engine

    saved = getattr(engine, "MAX_SHRINKING_SECONDS", None)
    if saved is None:
        yield
        return
    engine.MAX_SHRINKING_SECONDS = seconds  # type: ignore[assignment]
    try:
        yield
    finally:
        engine.MAX_SHRINKING_SECONDS = saved


def _find_violation(e: BaseException) -> Violation | None:
    if isinstance(e, Violation):
        return e
    if isinstance(e, BaseExceptionGroup):
        for inner in e.exceptions:
            found = _find_violation(inner)
            if found is not None:
                return found
    cause = e.__cause__ or e.__context__
    return _find_violation(cause) if cause is not None and cause is not e else None
