"""The process tier's checkers of wakes and leases: never early, never lost (an
append that landed owes its wake, whether its call returned or not), a dead
worker's wake delivered again (W7, W11-W13)."""

from __future__ import annotations

import bisect
import math
from collections import defaultdict

from fxworld_conformance.checkers.history import CLOCK_TOLERANCE, Finding, History, Op
from fxworld_conformance.checkers.log import _final_op, _landed

__all__ = ["check_wakes_never_early", "check_wakes_never_lost", "check_lease_redelivery"]


def _requests(h: History) -> dict[str, list[Op]]:
    """Session -> operations that asked for a wake and may have done so."""
    out: dict[str, list[Op]] = defaultdict(list)
    for op in h.ops:
        if op.session is None or op.outcome == "failed":
            continue
        if op.op == "wake" or (op.op == "append" and op.args.get("wake") is not None):
            out[op.session].append(op)
    return out


def _delay(op: Op) -> float:
    value = op.args.get("delay") if op.op == "wake" else op.args.get("wake")
    return float(value or 0.0)


def _deliveries(h: History) -> dict[str, list[Op]]:
    out: dict[str, list[Op]] = defaultdict(list)
    for op in h.ops:
        if op.op == "take_wake" and op.outcome == "ok" and isinstance(op.result, dict):
            out[str(op.result["session"])].append(op)
    for ops in out.values():
        ops.sort(key=lambda o: o.done)
    return out


def _lease_ops(h: History) -> dict[str, list[Op]]:
    """Lease token -> renew/finish operations on it."""
    out: dict[str, list[Op]] = defaultdict(list)
    for op in h.ops:
        if op.op in ("renew_wake", "finish_wake") and op.args.get("token") is not None:
            out[str(op.args["token"])].append(op)
    return out


def check_wakes_never_early(h: History) -> list[Finding]:
    """W11/W13: a first delivery (attempt 1) of a session's wake happens only once
    some request for it that was not already consumed by a finished delivery was due.

    A request that completed before a delivery was taken is consumed when that
    delivery is finished (coalescing, W11); one that arrived during the lease is not
    (W13) and keeps the due time it asked for.
    """
    out: list[Finding] = []
    requests = _requests(h)
    lease_ops = _lease_ops(h)
    for sid, takes in _deliveries(h).items():
        # (finish end, take start) of every finished delivery, by finish end.
        finished = sorted(
            (f.done, t.start)
            for t in takes
            for f in lease_ops.get(str(t.result["token"]), [])
            if f.op == "finish_wake" and f.outcome == "ok"
        )
        ends = [f for f, _ in finished]
        prefix: list[float] = []
        for _, started in finished:
            prefix.append(max(prefix[-1], started) if prefix else started)
        for take in takes:
            if take.result.get("attempt") != 1:
                continue
            k = bisect.bisect_left(ends, take.start)
            consumed_before = prefix[k - 1] if k else -math.inf
            candidates = [
                r
                for r in requests.get(sid, [])
                if r.start < take.done and not (r.outcome == "ok" and r.done < consumed_before)
            ]
            if not any(r.start + _delay(r) <= take.done + CLOCK_TOLERANCE for r in candidates):
                out.append(
                    Finding(
                        "W11",
                        f"session {sid}: a wake was delivered before any pending request for it "
                        "was due",
                        [*candidates[-4:], take],
                    )
                )
    return out


def _owes_wake(h: History, r: Op) -> bool:
    """Whether request ``r`` owes a wake: it returned, or it is an append whose
    call never returned (killed, cut) but whose entries are in the final log (W7:
    the wake is owed from the moment the entries landed)."""
    if r.args.get("retry_of"):
        return False
    if r.outcome == "ok":
        return True
    if h.landed_before_retries is not None and r.tag not in h.landed_before_retries:
        return False  # what is in the log may be the kit's retry's (it asks no wake)
    return (
        r.op == "append"
        and r.outcome == "indeterminate"
        and r.tag is not None
        and bool(_landed(h, r))
    )


def check_wakes_never_lost(h: History) -> list[Finding]:
    """W7/W13: every acknowledged wake request (``wake()`` or ``append(wake=)``) was
    delivered by some take that ended after the request began: a request that
    arrived while a lease was held survives that lease's finish. An append whose
    call never returned but whose entries landed owes its wake too."""
    out: list[Finding] = []
    deliveries = _deliveries(h)
    lease_ops = _lease_ops(h)
    for sid, ops in _requests(h).items():
        takes = deliveries.get(sid, [])
        last_take = max((t.done for t in takes), default=-math.inf)
        for r in ops:
            if last_take > r.start or not _owes_wake(h, r):
                continue
            before = [t for t in takes if t.done <= r.start][-1:]
            finishes = [
                f
                for t in before
                for f in lease_ops.get(str(t.result["token"]), [])
                if f.op == "finish_wake"
            ]
            g = "W7" if r.op == "append" else "W13"
            held = " (it arrived while a lease was held, then that lease was finished)"
            what = "an acknowledged wake request"
            if r.outcome != "ok":
                what = "an interrupted append(wake=) whose entries landed asked for a wake that"
            out.append(
                Finding(
                    g,
                    f"session {sid}: {what} was never delivered" + (held if finishes else ""),
                    [*before, r, *finishes, *([_final_op(sid)] if r.outcome != "ok" else [])],
                    _landed(h, r) if r.outcome != "ok" else [],
                )
            )
    return out


def check_lease_redelivery(h: History) -> list[Finding]:
    """W12: while a lease lasts nobody else gets the session's wake; a lease not
    finished is delivered again (``attempt + 1``) once it expires; a lease that was
    superseded can no longer be renewed or finished."""
    out: list[Finding] = []
    lease_ops = _lease_ops(h)
    takes_all = [op for op in h.ops if op.op == "take_wake"]
    unknown_takes = [op for op in takes_all if op.outcome == "indeterminate"]
    for sid, takes in _deliveries(h).items():
        for k, take in enumerate(takes):
            token = str(take.result["token"])
            mine = lease_ops.get(token, [])
            nxt = takes[k + 1] if k + 1 < len(takes) else None
            if nxt is not None:
                expiry = float(take.result.get("expires", 0.0))
                for r in mine:
                    if r.op == "renew_wake" and r.outcome == "ok" and r.done < nxt.start:
                        expiry = max(expiry, float(r.result.get("expires", 0.0)))
                finishing = [f for f in mine if f.op == "finish_wake" and f.start < nxt.done]
                if not finishing and nxt.done < expiry - CLOCK_TOLERANCE:
                    out.append(
                        Finding(
                            "W12",
                            f"session {sid}: its wake was handed out again "
                            f"{expiry - nxt.done:.2f}s before the first lease expired",
                            [take, *mine, nxt],
                        )
                    )
                finished = [f for f in mine if f.op == "finish_wake" and f.outcome != "failed"]
                unclear = [u for u in unknown_takes if u.start < nxt.done and u.done > take.start]
                want = int(take.result.get("attempt", 0)) + 1
                if not finished and not unclear and nxt.result.get("attempt") != want:
                    out.append(
                        Finding(
                            "W12",
                            f"session {sid}: an expired lease was delivered again with attempt "
                            f"{nxt.result.get('attempt')}, not {want}",
                            [take, *mine, nxt],
                        )
                    )
                for r in mine:
                    if r.outcome == "ok" and r.start > nxt.done:
                        out.append(
                            Finding(
                                "W12",
                                f"session {sid}: {r.op} of a lease succeeded after the wake had "
                                "been handed to another worker",
                                [take, nxt, r],
                            )
                        )
            if h.drained and nxt is None:
                done_ok = any(
                    f.op == "finish_wake" and f.outcome in ("ok", "indeterminate") for f in mine
                )
                if not done_ok:
                    out.append(
                        Finding(
                            "W12",
                            f"session {sid}: a lease that was never finished (its worker died or "
                            "lost it) was not delivered again",
                            [take, *mine],
                        )
                    )
    return out
