"""The kit's reference model: W1-W14 as a small, sequential, pure-Python machine.

Written from the contract alone (it shares no code with any World). Given the
model's state and one operation, it *predicts* the outcome a correct world must
give when that operation takes effect at that point; the state machines in
:mod:`fxworld_conformance.stateful` find, for each observed operation, a point
in a linear order of the writes where the prediction matches (linearizability).

Time is coarse on purpose, so that real clocks never make a prediction
ambiguous: a wake is due ``NOW`` (``delay=0``) or ``LATER`` (a delay far beyond
any test); a lease is long (outlives the test) or short (the kit sleeps past
it before it relies on it having expired).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Violation",
    "MEntry",
    "Landed",
    "Repeat",
    "FencedOut",
    "Conflicted",
    "AppendOutcome",
    "SessionModel",
    "WakeModel",
    "NOW",
    "LATER",
]

NOW = 0
"""A wake due at once (``delay=0``)."""
LATER = 1
"""A wake due after a delay far longer than any check runs (``delay=3600``)."""


class Violation(AssertionError):
    """A guarantee broken, with the evidence, raised by a directed check or a state
    machine. ``guarantee`` is ``"W1"`` .. ``"W17"``. (What a history checker of the
    process tier returns is a :class:`~fxworld_conformance.checkers.history.Finding`.)"""

    def __init__(self, guarantee: str, message: str) -> None:
        self.guarantee = guarantee
        self.message = message
        super().__init__(f"{guarantee} violated: {message}")


@dataclass(frozen=True)
class MEntry:
    """An entry as the model knows it (``seq`` is its index + 1 in the log)."""

    kind: str
    data: dict[str, Any]
    epoch: int | None


@dataclass(frozen=True)
class Landed:
    """The call writes its entries at ``first..last``."""

    first: int
    last: int


@dataclass(frozen=True)
class Repeat:
    """A keyed repeat: returns ``seq`` and writes nothing (W6)."""

    seq: int


@dataclass(frozen=True)
class FencedOut:
    """``Fenced``: the fence is not the newest (W2) or predates a delete (W14)."""

    newest: int | None
    after_delete: bool


@dataclass(frozen=True)
class Conflicted:
    """``Conflict`` with ``last`` the log's last seq (W5)."""

    last: int


AppendOutcome = Landed | Repeat | FencedOut | Conflicted


@dataclass
class SessionModel:
    """One session's log, fences and idempotency keys.

    ``era`` counts deletes; a fence is identified by ``(era, epoch)``.
    """

    log: list[MEntry] = field(default_factory=list)
    max_epoch: int = 0
    """The greatest epoch ever returned for this session, over all eras (W1)."""
    newest: int | None = None
    """The epoch of the newest fence of this era (None: no acquire since the delete)."""
    era: int = 0
    keys: dict[str, int] = field(default_factory=dict)

    def copy(self) -> SessionModel:
        return SessionModel(list(self.log), self.max_epoch, self.newest, self.era, dict(self.keys))

    @property
    def last(self) -> int:
        return len(self.log)

    # -- predictions ---------------------------------------------------------------

    def predict_append(
        self, n: int, *, fence: tuple[int, int] | None, expect: int | None, key: str | None
    ) -> AppendOutcome:
        """What ``append`` of ``n`` entries must do now (W2, W3, W5, W6).

        ``fence`` is ``(era, epoch)``. The key is checked first, then the fence,
        then ``expect``.
        """
        if key is not None and key in self.keys:
            return Repeat(self.keys[key])
        if fence is not None:
            era, epoch = fence
            if era != self.era:
                return FencedOut(self.newest, after_delete=True)
            if epoch != self.newest:
                return FencedOut(self.newest, after_delete=False)
        if expect is not None and expect != self.last:
            return Conflicted(self.last)
        return Landed(self.last + 1, self.last + n)

    def check_acquire(self, epoch: int) -> str | None:
        """Why an acquire returning ``epoch`` now breaks W1, or None."""
        if epoch <= self.max_epoch:
            return (
                f"acquire returned epoch {epoch}, not greater than {self.max_epoch}, "
                "an epoch already returned for this session"
            )
        return None

    def read(self, after: int, limit: int) -> list[tuple[int, MEntry]]:
        """``read(after, limit)`` now: ``(seq, entry)`` pairs (W9)."""
        return [(i + 1, e) for i, e in enumerate(self.log)][after : after + limit]

    # -- effects -----------------------------------------------------------------

    def apply_acquire(self, epoch: int) -> int:
        self.log.append(MEntry("fence", {"epoch": epoch}, epoch))
        self.max_epoch = max(self.max_epoch, epoch)
        self.newest = epoch
        return self.last

    def apply_append(
        self, entries: list[tuple[str, dict[str, Any]]], *, epoch: int | None, key: str | None
    ) -> int:
        for kind, data in entries:
            self.log.append(MEntry(kind, copy.deepcopy(data), epoch))
        if key is not None:
            self.keys[key] = self.last
        return self.last

    def apply_delete(self) -> None:
        self.log = []
        self.keys = {}
        self.newest = None
        self.era += 1


@dataclass
class _Wake:
    due: int | None
    """NOW or LATER: a request pending (while leased: one that arrived after the take)."""
    attempt: int = 0
    token: str | None = None
    short: bool = False
    expired: bool = False
    source: str = "wake()"


class WakeModel:
    """Wakes and leases of all sessions of one world (W7, W11-W14)."""

    def __init__(self) -> None:
        self._wakes: dict[str, _Wake] = {}
        self._gone: dict[str, str] = {}

    def wake(self, sid: str, due: int, source: str = "wake()") -> None:
        """``wake(delay)``: coalesce, keeping the earlier due time (W11).

        ``source`` is ``"wake()"`` or ``"append"`` (W7): it names the guarantee
        broken if the wake is then not delivered.
        """
        w = self._wakes.get(sid)
        if w is None:
            self._wakes[sid] = _Wake(due=due, source=source)
        else:
            if w.due is None or due < w.due:
                w.source = "re-wake" if w.token is not None else source
            w.due = due if w.due is None else min(w.due, due)
        self._gone.pop(sid, None)

    def gone(self, sid: str, how: str) -> None:
        """Note why ``sid`` has no wake owed (``finished``, ``deleted``, ``refused``)."""
        if sid not in self._wakes:
            self._gone[sid] = how

    def why_due(self, sid: str) -> str:
        """The guarantee broken if the due wake of ``sid`` is not delivered."""
        w = self._wakes[sid]
        if w.token is not None:
            return "W12"
        return {"append": "W7", "re-wake": "W13"}.get(w.source, "W11")

    def why_not(self, sid: str) -> tuple[str, str]:
        """The guarantee broken, and why, if ``sid`` is handed out now."""
        w = self._wakes.get(sid)
        if w is None:
            how = self._gone.get(sid, "never requested")
            g = {"finished": "W13", "deleted": "W14", "refused": "W7"}.get(how, "W11")
            return g, f"no wake of it is pending ({how})"
        if w.token is not None and not w.expired:
            return "W12", "its wake is leased to another worker and the lease has not expired"
        return "W11", "its wake is not due yet (delivered early)"

    def deliverable(self) -> set[str]:
        """Sessions ``take_wake`` may hand out now (W11, W12)."""
        out = set()
        for sid, w in self._wakes.items():
            if w.token is None and w.due == NOW:
                out.add(sid)
            elif w.token is not None and w.expired:
                out.add(sid)
        return out

    def uncertain(self) -> bool:
        """True while a short lease may or may not have expired."""
        return any(w.token is not None and w.short and not w.expired for w in self._wakes.values())

    def take(self, sid: str, token: str, *, short: bool) -> int:
        """Record a delivery of ``sid``; return the attempt it must carry (W12, W13)."""
        w = self._wakes[sid]
        w.attempt += 1
        w.token, w.short, w.expired, w.due = token, short, False, None
        return w.attempt

    def held(self, sid: str, token: str) -> bool:
        """Whether ``token`` is the live lease of ``sid`` (renew/finish succeed)."""
        w = self._wakes.get(sid)
        return w is not None and w.token == token and not w.expired

    def renew(self, sid: str, token: str, *, short: bool) -> None:
        """A renewed lease (a world may hand out a new token for it)."""
        w = self._wakes[sid]
        w.token, w.short = token, short

    def finish(self, sid: str) -> None:
        """Remove the wake unless a request arrived after the take (W13)."""
        w = self._wakes[sid]
        if w.due is None:
            del self._wakes[sid]
            self._gone[sid] = "finished"
        else:
            w.token, w.attempt, w.short, w.expired = None, 0, False, False
            w.source = "re-wake"

    def expire_short(self) -> None:
        """The kit slept past every short lease."""
        for w in self._wakes.values():
            if w.token is not None and w.short:
                w.expired = True

    def delete(self, sid: str) -> None:
        self._wakes.pop(sid, None)
        self._gone[sid] = "deleted"

    def pending(self, sid: str) -> bool:
        return sid in self._wakes

    def describe(self) -> str:
        parts = []
        for sid, w in sorted(self._wakes.items()):
            due = {None: "-", NOW: "now", LATER: "later"}[w.due]
            lease = "free" if w.token is None else ("expired" if w.expired else "leased")
            parts.append(f"{sid}: due={due} lease={lease} attempt={w.attempt}")
        return "; ".join(parts) or "no wakes"
