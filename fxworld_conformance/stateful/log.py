"""The log state machine: concurrent writers, readers and followers on a few
sessions, checked linearizably against the model (W1-W6, W8-W10, W14)."""

from __future__ import annotations

import asyncio

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from fxworld_conformance.model import Violation
from fxworld_conformance.stateful.base import (
    KEYS,
    MAX_INFLIGHT,
    READERS,
    SESSIONS,
    WRITERS,
    _KitMachine,
)
from fxworld_conformance.stateful.linearizable import Call, _show

__all__ = ["LogMachine"]


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
        self.wait(asyncio.sleep(0))

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
