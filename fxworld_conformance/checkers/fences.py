"""The process tier's checkers of epochs and fences: epochs monotone along the log,
a fenced writer stays out, a redelivered worker's epoch refuses the old one
(W1, W2, W8, W12)."""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

from fxworld_conformance.checkers.history import EntryDict, Finding, History, Op, entry_tag
from fxworld_conformance.checkers.log import _final_op, _landed, _writers

__all__ = ["check_epochs", "check_fenced_stays_out", "check_new_epoch_refuses_old"]


def check_epochs(h: History) -> list[Finding]:
    """W8/W1/W2/W3: fenced epochs never decrease along the log; takeovers' epochs
    grow strictly along the log and in real time; each entry carries its call's
    fence epoch (``None`` if unfenced)."""
    out: list[Finding] = []
    by_tag = {op.tag: op for op in h.appends()}
    for sid, log in h.final.items():
        high: EntryDict | None = None
        last_fence: EntryDict | None = None
        for entry in log:
            epoch = entry.get("epoch")
            if entry.get("kind") == "fence":
                if last_fence is not None and not (
                    isinstance(epoch, int) and epoch > last_fence.get("epoch", 0)
                ):
                    out.append(
                        Finding(
                            "W1",
                            f"session {sid}: takeover at seq {entry.get('seq')} has epoch {epoch}, "
                            f"not above the earlier takeover's {last_fence.get('epoch')}",
                            [_final_op(sid)],
                            [last_fence, entry],
                        )
                    )
                last_fence = entry
            if isinstance(epoch, int):
                if high is not None and epoch < high.get("epoch", 0):
                    out.append(
                        Finding(
                            "W8",
                            f"session {sid}: epoch {epoch} at seq {entry.get('seq')} after epoch "
                            f"{high.get('epoch')} at seq {high.get('seq')}: a replaced writer "
                            "landed after its successor",
                            [_final_op(sid), *_writers(h, sid, [high, entry])],
                            [high, entry],
                        )
                    )
                    break
                high = entry
            tag = entry_tag(entry)
            writer = by_tag.get(tag) if tag is not None else None
            if writer is not None and writer.session == sid and writer.fence != epoch:
                g = "W3" if writer.fence is None else "W2"
                out.append(
                    Finding(
                        g,
                        f"session {sid}: entry at seq {entry.get('seq')} has epoch {epoch} but "
                        f"its call was given fence epoch {writer.fence}",
                        [writer],
                        [entry],
                    )
                )
    acquires: dict[str, list[Op]] = defaultdict(list)
    for op in h.ops:
        if op.op == "acquire" and op.outcome == "ok" and op.session is not None:
            acquires[op.session].append(op)
    for sid, ops in acquires.items():
        by_end = sorted(ops, key=lambda o: o.done)
        best: Op | None = None
        k = 0
        for op in sorted(ops, key=lambda o: o.start):
            while k < len(by_end) and by_end[k].done < op.start:
                if best is None or by_end[k].result["epoch"] > best.result["epoch"]:
                    best = by_end[k]
                k += 1
            if best is not None and op.result["epoch"] <= best.result["epoch"]:
                out.append(
                    Finding(
                        "W1",
                        f"session {sid}: acquire returned epoch {op.result['epoch']} after an "
                        f"acquire had already returned epoch {best.result['epoch']}",
                        [best, op],
                    )
                )
    return out


def _acquired_before(h: History) -> dict[str, list[tuple[float, int, Op]]]:
    """Session -> (end time, epoch, op) of ok acquires sorted by end, with the
    running maximum epoch folded in (each tuple holds the best so far)."""
    acquires: dict[str, list[Op]] = defaultdict(list)
    for op in h.ops:
        if op.op == "acquire" and op.outcome == "ok" and op.session is not None:
            acquires[op.session].append(op)
    out: dict[str, list[tuple[float, int, Op]]] = {}
    for sid, ops in acquires.items():
        best: Op | None = None
        rows = []
        for op in sorted(ops, key=lambda o: o.done):
            if best is None or op.result["epoch"] > best.result["epoch"]:
                best = op
            rows.append((op.done, int(best.result["epoch"]), best))
        out[sid] = rows
    return out


def _newest_before(rows: list[tuple[float, int, Op]], t: float) -> tuple[int, Op] | None:
    k = bisect.bisect_left([r[0] for r in rows], t)
    if k == 0:
        return None
    return rows[k - 1][1], rows[k - 1][2]


def check_fenced_stays_out(h: History) -> list[Finding]:
    """W2/W1: an append with a fence that was already stale when the call began
    (a greater epoch had been returned) never lands, and a writer once refused with
    ``Fenced`` is refused on every later attempt with that fence."""
    out: list[Finding] = []
    rows = _acquired_before(h)
    refused: dict[tuple[str, int], Op] = {}
    for op in h.appends():
        if op.outcome == "failed" and op.error == "Fenced" and op.fence is not None:
            key = (op.session or "", op.fence)
            if key not in refused or op.done < refused[key].done:
                refused[key] = op
    for op in h.appends():
        if op.fence is None or op.session is None:
            continue
        landed = bool(_landed(h, op)) and op.outcome != "failed"
        if not landed or op.args.get("key") is not None:
            continue
        newest = _newest_before(rows.get(op.session, []), op.start)
        if newest is not None and newest[0] > op.fence:
            out.append(
                Finding(
                    "W2",
                    f"session {op.session}: a stale fence (epoch {op.fence}) was accepted after "
                    f"epoch {newest[0]} had been handed out",
                    [newest[1], op],
                    _landed(h, op),
                )
            )
            continue
        first_refusal = refused.get((op.session, op.fence))
        if first_refusal is not None and first_refusal.done < op.start:
            out.append(
                Finding(
                    "W2",
                    f"session {op.session}: the writer with epoch {op.fence} was refused, then "
                    "accepted again",
                    [first_refusal, op],
                    _landed(h, op),
                )
            )
    return out


def check_new_epoch_refuses_old(h: History) -> list[Finding]:
    """W12/W2: when a wake is delivered again to a new worker, which takes over the
    session, the old worker (frozen or slow past its lease) is refused from then on."""
    out: list[Finding] = []
    takeovers = [
        op
        for op in h.ops
        if op.op == "acquire" and op.outcome == "ok" and op.args.get("lease") is not None
    ]
    for op in h.appends():
        token = op.args.get("lease")
        if token is None or op.fence is None or op.session is None or op.outcome == "failed":
            continue
        if not _landed(h, op):
            continue
        for other in takeovers:
            if (
                other.session == op.session
                and other.args.get("lease") != token
                and other.result["epoch"] > op.fence
                and other.done < op.start
            ):
                out.append(
                    Finding(
                        "W12",
                        f"session {op.session}: after the wake was delivered again and the new "
                        f"worker took over with epoch {other.result['epoch']}, the old worker's "
                        f"append with epoch {op.fence} still landed",
                        [*_takes_of(h, op.session, {token, other.args.get("lease")}), other, op],
                        _landed(h, op),
                    )
                )
                break
    return out


def _takes_of(h: History, session: str, tokens: set[Any]) -> list[Op]:
    return [
        op
        for op in h.ops
        if op.op == "take_wake"
        and op.outcome == "ok"
        and isinstance(op.result, dict)
        and op.result.get("token") in tokens
        and op.session == session
    ]
