"""What the kit's state machines share: one event loop and one fresh world per
example, the reference model, the log calls in flight and their immediate checks,
the linearizability check at quiescence (:mod:`fxworld_conformance.stateful.linearizable`)
and the followers."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from hypothesis.stateful import RuleBasedStateMachine

from fxworld import World
from fxworld.errors import WorldError
from fxworld.types import Entry, Fence, NewEntry
from fxworld_conformance.bounds import watched
from fxworld_conformance.model import SessionModel, Violation, WakeModel
from fxworld_conformance.stateful.linearizable import (
    Call,
    Linearizable,
    _guarantee_of,
    _is_int,
    _same,
)
from fxworld_conformance.target import CALL_TIMEOUT, Target, call_world

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
class Follower:
    sid: str
    after: int
    got: list[Entry] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    error: BaseException | None = None
    cursor: int = 0


class _KitMachine(RuleBasedStateMachine, Linearizable):
    """The shared engine: one event loop, one fresh world, the model, the op log."""

    target: ClassVar[Target]
    stats: ClassVar[Stats]

    def __init__(self) -> None:
        super().__init__()
        self.stats.examples += 1
        # A Runner, not a bare loop: a Ctrl-C cancels the call in flight (as
        # asyncio.run does), so teardown can still close and drop the world.
        self.runner = asyncio.Runner()
        self.loop = self.runner.get_loop()
        try:
            self.world: World = self.wait(asyncio.wait_for(self.target.open(), CALL_TIMEOUT))
        except BaseException:  # no teardown follows a failed __init__
            self.runner.close()
            raise
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
        return self.wait(call_world(coro, what, guarantee))

    def wait(self, aw: Awaitable[T]) -> T:
        """Run the event loop until ``aw`` is done (cancelled when the check runs
        past its time bound: :func:`fxworld_conformance.bounds.watched`)."""
        coro = _awaiting(aw)
        run = watched(coro)
        try:
            return self.runner.run(run)
        except BaseException:  # a Ctrl-C before any started: no "never awaited"
            for c in (run, coro, aw):
                if inspect.iscoroutine(c) and inspect.getcoroutinestate(c) == "CORO_CREATED":
                    c.close()
            raise

    def teardown(self) -> None:
        try:
            for f in list(self.followers.values()):
                with contextlib.suppress(Violation):
                    self._stop_follower(f)
            for op in self.inflight:
                if op.task is not None:
                    with contextlib.suppress(Violation):
                        self._cancel(op.task)
            self.wait(self.target.close(self.world))
        finally:
            self.runner.close()  # cancels what a Ctrl-C cut short

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
            self.wait(asyncio.wait({op.task}))
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
            self.wait(asyncio.wait({task}, timeout=0.2))
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

        self.wait(wait())
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


async def _awaiting(aw: Awaitable[T]) -> T:
    return await aw
