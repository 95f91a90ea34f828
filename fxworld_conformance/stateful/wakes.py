"""The wake state machine: wakes, appends with ``wake=``, takes (one by one and in
batches, ``fxworld.take_wakes``), renewals, finishes, lease expiry and delete, one
at a time, each predicted exactly by the model (W7, W11-W14)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from fxworld import take_wakes
from fxworld.errors import LeaseLost
from fxworld.types import WakeLease
from fxworld_conformance.model import LATER, NOW, Violation
from fxworld_conformance.stateful.base import (
    LATER_DELAY,
    LONG_LEASE,
    SESSIONS,
    SHORT_LEASE,
    WAKE_SESSIONS,
    WORKERS,
    WRITERS,
    _KitMachine,
)

__all__ = ["WakeMachine"]


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
            self._none_due(can, before, "take_wake returned None")
            return
        self._took(worker, got, can, before, short, local_expiry, "take_wake")

    @precondition(lambda self: not self.wakes.uncertain())
    @rule(
        worker=st.sampled_from(WORKERS),
        limit=st.integers(1, 3),
        short=st.sampled_from([False, False, False, True]),
    )
    def take_batch(self, worker: str, limit: int, short: bool) -> None:
        """``fxworld.take_wakes``: each wake of the batch as ``take_wake`` would take
        it (W11-W13 per wake), each session at most once (W12)."""
        lease = SHORT_LEASE if short else LONG_LEASE
        can = self.wakes.deliverable()
        before = self.wakes.describe()
        what = f"take_wakes(lease={lease:g}, limit={limit})"
        got = self.run(take_wakes(self.world, lease=lease, limit=limit), what, "W12")
        local_expiry = time.monotonic() + lease
        if not isinstance(got, list) or len(got) > limit:
            raise Violation("W12", f"{what} returned {got!r}")
        sids = [w.session_id for w in got if isinstance(w, WakeLease)]
        if len(set(sids)) < len(sids):
            raise Violation("W12", f"{what} holds one session twice: {sids} ({before})")
        if not got:
            self._none_due(can, before, f"{what} returned []")
        for w in got:
            self._took(worker, w, can, before, short, local_expiry, what)

    @precondition(lambda self: not self.wakes.uncertain())
    @rule(worker=st.sampled_from(WORKERS), later=st.booleans())
    def take_batch_rewake_take(self, worker: str, later: bool) -> None:
        """A batch, a new request for a session it holds, another batch (W12: not
        that session while its lease lasts); the state machine's own way to reach
        a re-wake during a batch's lease often."""
        before = len(self.leases)
        self.take_batch(worker, 2, short=False)
        if len(self.leases) == before:
            return  # nothing was due
        self.wake(self.leases[-1][1].session_id, later)
        self.take_batch(worker, 2, short=False)

    def _none_due(self, can: set[str], before: str, what: str) -> None:
        """Nothing was handed out: a violation if a wake was due (W12, or the
        guarantee that made it due)."""
        if can:
            sid = sorted(can)[0]
            raise Violation(
                self.wakes.why_due(sid), f"{what}, but a wake of {sid!r} is due ({before})"
            )

    def _took(
        self,
        worker: str,
        got: object,
        can: set[str],
        before: str,
        short: bool,
        local_expiry: float,
        what: str,
    ) -> None:
        """Check one lease handed out from the deliverable set ``can`` and record it."""
        if not isinstance(got, WakeLease) or got.session_id not in SESSIONS:
            raise Violation("W12", f"{what} returned {got!r}")
        sid = got.session_id
        if sid not in can:
            g, why = self.wakes.why_not(sid)
            raise Violation(g, f"{what} handed out {sid!r} but {why} ({before})")
        want = self.wakes.take(sid, got.token, short=short)
        if got.attempt != want:
            raise Violation(
                "W12",
                f"{what} of {sid!r} gave attempt {got.attempt}, expected {want} ({before})",
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
