"""The process tier's checkers of the log: dense positions, no duplicate, nothing
acknowledged lost, readers agree, whole batches, refused writes leave no trace,
indeterminate appends all or nothing, follow and monotone reads (W1-W6, W9, W10),
and the history queries every checker shares."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from fxworld_conformance.checkers.history import (
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
    "check_dense",
    "check_no_duplicates",
    "check_no_lost",
    "check_readers_agree",
    "check_batches_atomic",
    "check_refused_no_trace",
    "check_indeterminate",
    "check_follow",
    "check_reads_monotone",
]


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
