"""The checkers of contract section 5: each judges a whole
:class:`~fxworld_conformance.history.History` of one process-tier run and returns
the :class:`~fxworld_conformance.history.Finding` s it proves, each naming the
guarantee (W-number) broken and carrying the operations that prove it.

A call whose outcome is unknown (killed, cut, timed out) is judged by what
landed: if its entries are in the final log it owes all of them (W4), its wake
(W7) and its key (W6).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from fxworld_conformance.history import (
    CLOCK_TOLERANCE,
    EntryDict,
    Finding,
    History,
    Op,
    _content,
    _entry_text,
    _short,
    entry_tag,
)

__all__ = [
    "Check",
    "CHECKS",
    "run_checks",
    "check_dense",
    "check_no_duplicates",
    "check_no_lost",
    "check_readers_agree",
    "check_batches_atomic",
    "check_refused_no_trace",
    "check_indeterminate",
    "check_epochs",
    "check_fenced_stays_out",
    "check_follow",
    "check_reads_monotone",
    "check_wakes_never_early",
    "check_wakes_never_lost",
    "check_lease_redelivery",
    "check_new_epoch_refuses_old",
    "check_errors_typed",
]


@dataclass(frozen=True)
class Check:
    """One checker: a row of the kit's report."""

    name: str
    guarantees: tuple[str, ...]
    run: Callable[[History], list[Finding]]
    needs_drain: bool = False


def _final_op(session: str) -> Op:
    """A stand-in operation for the final read of ``session`` in violation reports."""
    return Op(id=f"final:{session}", process="kit (final)", op="read", session=session,
              args={"after": 0}, outcome="ok", start=math.inf, end=math.inf)  # fmt: skip


def _writers(h: History, session: str, entries: Iterable[EntryDict]) -> list[Op]:
    """The recorded calls that carry the batch ids of ``entries``."""
    tags = {t for t in (entry_tag(e) for e in entries) if t is not None}
    return [op for op in h.appends() if op.tag in tags and op.session == session]


def _landed(h: History, op: Op) -> list[EntryDict]:
    assert op.session is not None and op.tag is not None
    return h.positions(op.session).get(op.tag, [])


def _seen_by_readers(h: History) -> dict[tuple[str, str], list[Op]]:
    """(session, batch id) -> reads/follows that showed an entry of it."""
    seen: dict[tuple[str, str], list[Op]] = defaultdict(list)
    for op in h.observations():
        assert op.session is not None
        for entry in op.result:
            tag = entry_tag(entry)
            if tag is not None:
                seen[(op.session, tag)].append(op)
    return seen


# -- checkers -------------------------------------------------------------------------


def check_dense(h: History) -> list[Finding]:
    """W4/W9: positions are dense from 1 in the final log, and every read returned a
    contiguous slice starting right after its cursor, at most ``limit`` long."""
    out: list[Finding] = []
    for sid, log in h.final.items():
        for k, entry in enumerate(log, 1):
            if entry.get("seq") != k:
                near = log[max(0, k - 3) : k + 1]
                out.append(
                    Finding(
                        "W4",
                        f"session {sid}: the log is not dense: position {k} holds seq "
                        f"{entry.get('seq')}",
                        [_final_op(sid), *_writers(h, sid, near)],
                        near,
                    )
                )
                break
    for op in h.observations():
        if op.op != "read" or op.outcome != "ok":
            continue
        after = int(op.args.get("after", 0))
        limit = int(op.args.get("limit", 1000))
        seqs = [e.get("seq") for e in op.result]
        if seqs != list(range(after + 1, after + 1 + len(seqs))):
            out.append(
                Finding(
                    "W9",
                    f"read(after={after}) is not a contiguous slice from {after + 1}: seqs "
                    f"{_short(seqs)}",
                    [op],
                )
            )
        elif len(seqs) > limit:
            out.append(Finding("W9", f"read returned {len(seqs)} entries over limit={limit}", [op]))
    return out


def check_no_duplicates(h: History) -> list[Finding]:
    """W4/W6: every entry the kit wrote appears at most once; nothing appears that
    no call wrote; every takeover's epoch appears once."""
    out: list[Finding] = []
    keyed = {op.tag for op in h.appends() if op.args.get("key") is not None}
    tags = {op.tag for op in h.appends()}
    for sid, log in h.final.items():
        seen: dict[tuple[str, int], EntryDict] = {}
        epochs: dict[int, EntryDict] = {}
        for entry in log:
            tag = entry_tag(entry)
            if entry.get("kind") == "fence":
                epoch = (entry.get("data") or {}).get("epoch")
                if isinstance(epoch, int):
                    if epoch in epochs:
                        out.append(
                            Finding(
                                "W1",
                                f"session {sid}: epoch {epoch} was handed out twice",
                                [_final_op(sid)],
                                [epochs[epoch], entry],
                            )
                        )
                    epochs[epoch] = entry
                continue
            if tag is None or tag not in tags:
                out.append(
                    Finding(
                        "W4",
                        f"session {sid}: seq {entry.get('seq')} holds an entry no call wrote",
                        [_final_op(sid)],
                        [entry],
                    )
                )
                continue
            index = (entry.get("data") or {}).get("i", 0)
            if (tag, index) in seen:
                first = seen[(tag, index)]
                g = "W6" if tag in keyed else "W4"
                why = "a keyed call landed twice" if g == "W6" else "an entry is duplicated"
                out.append(
                    Finding(
                        g,
                        f"session {sid}: {why}: batch {tag} entry {index} at seqs "
                        f"{first.get('seq')} and {entry.get('seq')}",
                        [_final_op(sid), *_writers(h, sid, [entry])],
                        [first, entry],
                    )
                )
            else:
                seen[(tag, index)] = entry
    return out


def check_no_lost(h: History) -> list[Finding]:
    """W4/W5/W6/W1: every acknowledged append is in the final log, whole, ending at
    the seq it returned (``expect=n`` starting at ``n + 1``); every acknowledged
    takeover's ``fence`` entry is where its fence says."""
    out: list[Finding] = []
    for op in h.appends():
        if op.outcome != "ok" or op.session is None:
            continue
        landed = _landed(h, op)
        n = int(op.args.get("n", 1))
        keyed = op.args.get("key") is not None
        if not landed:
            out.append(
                Finding(
                    "W4",
                    f"acknowledged append of batch {op.tag} is not in the log",
                    [op, _final_op(op.session)],
                )
            )
            continue
        if len({(e.get("data") or {}).get("i") for e in landed}) < n:
            out.append(
                Finding(
                    "W4",
                    f"acknowledged append of batch {op.tag} lost entries: {len(landed)} of {n}",
                    [op, _final_op(op.session)],
                    landed,
                )
            )
            continue
        if landed[-1].get("seq") != op.result:
            out.append(
                Finding(
                    "W6" if keyed and op.args.get("retry_of") else "W4",
                    f"append of batch {op.tag} returned seq {op.result} but its last entry "
                    f"is at seq {landed[-1].get('seq')}",
                    [op, _final_op(op.session)],
                    landed,
                )
            )
        expect = op.args.get("expect")
        if expect is not None and not keyed and landed[0].get("seq") != expect + 1:
            out.append(
                Finding(
                    "W5",
                    f"append with expect={expect} landed at seq {landed[0].get('seq')}",
                    [op, _final_op(op.session)],
                    landed,
                )
            )
    for op in h.ops:
        if op.op != "acquire" or op.outcome != "ok" or op.session is None:
            continue
        epoch, seq = op.result.get("epoch"), op.result.get("seq")
        log = h.final.get(op.session, [])
        entry = log[seq - 1] if isinstance(seq, int) and 0 < seq <= len(log) else None
        if (
            entry is None
            or entry.get("kind") != "fence"
            or entry.get("epoch") != epoch
            or (entry.get("data") or {}).get("epoch") != epoch
        ):
            out.append(
                Finding(
                    "W1",
                    f"acknowledged takeover (epoch {epoch}) has no fence entry at seq {seq}",
                    [op, _final_op(op.session)],
                    [entry] if entry else [],
                )
            )
    return out


def check_readers_agree(h: History) -> list[Finding]:
    """W9/W4: every reader that saw a position saw the same entry there, and it is
    the entry the final log holds (no entry changed, moved or vanished)."""
    out: list[Finding] = []
    reported: set[tuple[str, int]] = set()
    for op in h.observations():
        assert op.session is not None
        log = h.final.get(op.session, [])
        for entry in op.result:
            seq = entry.get("seq")
            if not isinstance(seq, int) or (op.session, seq) in reported:
                continue
            final = log[seq - 1] if 0 < seq <= len(log) else None
            if final is None or _content(final) != _content(entry):
                reported.add((op.session, seq))
                shown = [entry] + ([final] if final else [])
                what = "the final log has no such position" if final is None else "final differs"
                g = "W10" if op.op == "follow" else "W9"
                out.append(
                    Finding(
                        g,
                        f"session {op.session}: {op.op} saw seq {seq} as {_entry_text(entry)!r} "
                        f"but {what}",
                        [op, _final_op(op.session), *_writers(h, op.session, shown)],
                        shown,
                    )
                )
    # Readers among themselves (also catches disagreement the final read cannot see).
    first: dict[tuple[str, int], tuple[Op, EntryDict]] = {}
    for op in h.observations():
        assert op.session is not None
        for entry in op.result:
            key = (op.session, entry.get("seq", 0))
            if key in reported:
                continue
            if key not in first:
                first[key] = (op, entry)
            elif _content(first[key][1]) != _content(entry):
                reported.add(key)
                other, seen = first[key]
                out.append(
                    Finding(
                        "W9",
                        f"session {op.session}: two readers saw different entries at seq {key[1]}",
                        [other, op],
                        [seen, entry],
                    )
                )
    return out


def check_batches_atomic(h: History) -> list[Finding]:
    """W4: the entries of one call sit at consecutive positions in order, never
    interleaved with another call; a read that reached the end of the log never
    showed part of a batch."""
    out: list[Finding] = []
    by_tag = {op.tag: op for op in h.appends()}
    for sid, log in h.final.items():
        for tag, entries in h.positions(sid).items():
            seqs = [e.get("seq", 0) for e in entries]
            index = [int((e.get("data") or {}).get("i", 0)) for e in entries]
            if len(set(index)) != len(index):
                continue  # duplicates: check_no_duplicates reports them
            contiguous = seqs == list(range(seqs[0], seqs[0] + len(seqs)))
            ordered = index == sorted(index)
            if not (contiguous and ordered):
                lo, hi = seqs[0], seqs[-1]
                ops = [op for op in (by_tag.get(tag),) if op is not None]
                between = log[lo - 1 : hi] if hi - lo < 12 else entries
                out.append(
                    Finding(
                        "W4",
                        f"session {sid}: batch {tag} is "
                        + ("interleaved with other entries" if not contiguous else "out of order"),
                        [*ops, *_writers(h, sid, between)],
                        between,
                    )
                )
    for op in h.observations():
        if op.op != "read" or op.outcome != "ok" or not op.result:
            continue
        if len(op.result) >= int(op.args.get("limit", 1000)):
            continue
        last = op.result[-1]
        data = last.get("data") or {}
        if isinstance(data, dict) and "b" in data and data.get("i", 0) < data.get("n", 1) - 1:
            writer = by_tag.get(data["b"])
            out.append(
                Finding(
                    "W4",
                    f"session {op.session}: a read reached the end of the log in the middle "
                    f"of batch {data['b']} (entry {data.get('i')} of {data.get('n')})",
                    [op, *([writer] if writer else [])],
                    [last],
                )
            )
    return out


def check_refused_no_trace(h: History) -> list[Finding]:
    """W2/W5/W3/W6: a refused append (``Fenced``, ``Conflict``) left nothing behind,
    and an unfenced append without ``expect`` was never refused."""
    out: list[Finding] = []
    seen = _seen_by_readers(h)
    keyed_landed: dict[str, bool] = {}
    for op in h.appends():
        if op.session is None:
            continue
        unconditional = op.fence is None and op.args.get("expect") is None
        if op.outcome == "failed" and unconditional:
            out.append(
                Finding("W3", f"an unfenced append without expect was refused ({op.error})", [op])
            )
        if op.outcome != "failed":
            continue
        assert op.tag is not None
        if op.args.get("key") is not None:
            # A keyed retry shares the batch id of the call it repeats: if any call
            # with this key returned ok or may have landed, the entries are its.
            if op.tag not in keyed_landed:
                keyed_landed[op.tag] = any(
                    o.tag == op.tag and o.outcome != "failed" for o in h.appends()
                )
            if keyed_landed[op.tag]:
                if _landed(h, op):
                    out.append(
                        Finding(
                            "W6",
                            f"a repeat of keyed batch {op.tag} was refused ({op.error}) although "
                            "a call with its key landed: it must return that call's seq",
                            [o for o in h.appends() if o.tag == op.tag],
                        )
                    )
                continue
        landed = _landed(h, op)
        readers = seen.get((op.session, op.tag), [])
        if landed or readers:
            g = {"Fenced": "W2", "Conflict": "W5"}.get(op.error or "", "W15")
            where = "is in the final log" if landed else "was seen by a reader"
            out.append(
                Finding(
                    g,
                    f"session {op.session}: append refused with {op.error} but batch {op.tag} "
                    f"{where}",
                    [op, *readers[:2], *([_final_op(op.session)] if landed else [])],
                    landed,
                )
            )
    return out


def check_indeterminate(h: History) -> list[Finding]:
    """W4: an append whose outcome is unknown (cut, timeout, killed) landed entirely
    or not at all."""
    out: list[Finding] = []
    for op in h.appends():
        if op.outcome != "indeterminate" or op.session is None:
            continue
        landed = _landed(h, op)
        n = int(op.args.get("n", 1))
        index = {(e.get("data") or {}).get("i") for e in landed}
        if landed and len(index) != n:
            out.append(
                Finding(
                    "W4",
                    f"session {op.session}: an interrupted append of batch {op.tag} landed "
                    f"{len(index)} of its {n} entries",
                    [op, _final_op(op.session)],
                    landed,
                )
            )
    return out


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
                        [
                            *_takes_of(h, op.session, {token, other.args.get("lease")}),
                            other,
                            op,
                        ],
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


def check_follow(h: History) -> list[Finding]:
    """W10: each follow yielded every entry after its cursor, in order, once; a
    follower that reconnected with the last seq it saw continued with no gap and no
    duplicate (each follower's view is a prefix of the log)."""
    out: list[Finding] = []
    chains: dict[tuple[str, str], list[Op]] = defaultdict(list)
    for op in h.observations():
        if op.op != "follow":
            continue
        assert op.session is not None
        chains[(op.process, op.session)].append(op)
        after = int(op.args.get("after", 0))
        seqs = [e.get("seq") for e in op.result]
        if seqs != list(range(after + 1, after + 1 + len(seqs))):
            out.append(
                Finding(
                    "W10",
                    f"session {op.session}: follow(after={after}) yielded seqs {_short(seqs)}: "
                    "a gap, a duplicate or out of order",
                    [op],
                )
            )
    for (_, sid), ops in chains.items():
        last: Op | None = None
        cursor: int | None = None
        for op in sorted(ops, key=lambda o: o.start):
            after = int(op.args.get("after", 0))
            if cursor is not None and last is not None and after == cursor and op.result:
                first = op.result[0].get("seq")
                if first != cursor + 1:
                    out.append(
                        Finding(
                            "W10",
                            f"session {sid}: reconnecting after seq {cursor} resumed at "
                            f"seq {first}",
                            [last, op],
                        )
                    )
            if op.result:
                cursor, last = op.result[-1].get("seq"), op
            elif cursor is None:
                cursor, last = after, op
    return out


def check_reads_monotone(h: History) -> list[Finding]:
    """W9: one caller's reads never go backwards: once it saw seq n, a later read
    that reached the end of the log ends at n or beyond (no entry vanished, no hole
    appeared behind what it saw)."""
    out: list[Finding] = []
    per: dict[tuple[str, str], list[Op]] = defaultdict(list)
    for op in h.observations():
        if op.outcome == "ok" or op.op == "follow":
            assert op.session is not None
            per[(op.process, op.session)].append(op)
    for (_, sid), ops in per.items():
        ops.sort(key=lambda o: o.start)
        best: tuple[int, Op] | None = None
        pending: list[Op] = sorted(ops, key=lambda o: o.done)
        k = 0
        for op in ops:
            while k < len(pending) and pending[k].done < op.start:
                done = pending[k]
                if done.result:
                    top = done.result[-1].get("seq", 0)
                    if best is None or top > best[0]:
                        best = (top, done)
                k += 1
            if op.op != "read" or op.outcome != "ok" or best is None:
                continue
            after = int(op.args.get("after", 0))
            end = int(op.result[-1].get("seq", after)) if op.result else after
            short = len(op.result) < int(op.args.get("limit", 1000))
            if short and after < best[0] and end < best[0]:
                out.append(
                    Finding(
                        "W9",
                        f"session {sid}: this caller saw seq {best[0]}, then a read found the log "
                        f"ending at seq {end}",
                        [best[1], op],
                    )
                )
                break
    return out


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


def check_errors_typed(h: History) -> list[Finding]:
    """W16: every error a world raised is one of fxworld's (driver errors never leak)."""
    bad = [op for op in h.ops if not op.typed]
    if not bad:
        return []
    kinds = sorted({op.error or "?" for op in bad})
    return [
        Finding(
            "W16",
            f"{len(bad)} operations raised errors outside fxworld.errors: {'; '.join(kinds[:3])}",
            bad[:4],
        )
    ]


CHECKS: list[Check] = [
    Check("dense positions", ("W4", "W9"), check_dense),
    Check("no duplicates", ("W4", "W6"), check_no_duplicates),
    Check("no lost acknowledged append", ("W4", "W5", "W1"), check_no_lost),
    Check("readers agree on every position", ("W9",), check_readers_agree),
    Check("batches atomic", ("W4",), check_batches_atomic),
    Check("refused writes leave no trace", ("W2", "W3", "W5"), check_refused_no_trace),
    Check("indeterminate appends all or nothing", ("W4",), check_indeterminate),
    Check("epochs monotone along the log", ("W8", "W1"), check_epochs),
    Check("fenced writer stays out", ("W2",), check_fenced_stays_out),
    Check("follow prefix-consistent across reconnects", ("W10",), check_follow),
    Check("reads never go backwards", ("W9",), check_reads_monotone),
    Check("wakes never early", ("W11",), check_wakes_never_early),
    Check("wakes never lost", ("W7", "W13"), check_wakes_never_lost, needs_drain=True),
    Check("dead worker's wake delivered again", ("W12",), check_lease_redelivery),
    Check("redelivered worker's epoch refuses the old", ("W12", "W2"), check_new_epoch_refuses_old),
    Check("errors typed", ("W16",), check_errors_typed),
]
"""Every checker, in report order."""


def run_checks(h: History) -> list[tuple[Check, list[Finding]]]:
    """Run every checker on ``h``; a checker that needs a drained history and does
    not have one is given no violations."""
    results: list[tuple[Check, list[Finding]]] = []
    for check in CHECKS:
        if check.needs_drain and not h.drained:
            results.append((check, []))
            continue
        results.append((check, check.run(h)))
    return results
