"""The history checkers of the process tier, on small synthetic histories.

Each checker is shown to pass on a good history and to fail on a bad one, naming
the guarantee and printing the operations that prove it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fxworld.errors import BackendUnavailable, Fenced
from fxworld_conformance import checkers as chk
from fxworld_conformance.checkers import CHECKS
from fxworld_conformance.checkers import history as hist
from fxworld_conformance.checkers.history import (
    FileSink,
    Finding,
    History,
    ListSink,
    Op,
    Recorder,
    load_records,
    read_record_file,
)


class Builder:
    """Writes a history by hand: operations at increasing times."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.final: dict[str, list[dict[str, Any]]] = {}
        self.t = 0.0

    def op(
        self,
        process: str,
        op: str,
        session: str | None = None,
        outcome: hist.Outcome = "ok",
        result: Any = None,
        *,
        at: float | None = None,
        took: float = 0.01,
        error: str | None = None,
        typed: bool = True,
        **args: Any,
    ) -> Op:
        start = self.t + 1.0 if at is None else at
        self.t = max(self.t, start)
        made = Op(
            id=f"{process}#{len(self.ops) + 1}",
            process=process,
            op=op,
            session=session,
            args={k: v for k, v in args.items() if v is not None},
            start=start,
            end=None if took < 0 else start + took,
            outcome=outcome,
            result=result,
            error=error,
            typed=typed,
        )
        if op == "append" and "tag" not in made.args:
            made.args["tag"] = made.id
        if op == "take_wake" and isinstance(result, dict):
            made.session = result["session"]
        self.ops.append(made)
        return made

    def take(self, process: str, session: str, token: str, attempt: int, expires: float) -> Op:
        """A ``take_wake`` that got ``session``'s wake, its lease expiring ``expires``
        seconds after the previous operation's start."""
        lease = {
            "session": session,
            "token": token,
            "attempt": attempt,
            "expires": self.t + expires,
        }
        return self.op(process, "take_wake", None, result=lease)

    def land(self, session: str, op: Op, epoch: int | None = None) -> None:
        """Put ``op``'s batch at the end of ``session``'s final log."""
        log = self.final.setdefault(session, [])
        n = int(op.args.get("n", 1))
        for i in range(n):
            log.append(entry(len(log) + 1, op.args["tag"], i, n, epoch))

    def fence(self, session: str, epoch: int) -> int:
        log = self.final.setdefault(session, [])
        log.append({"seq": len(log) + 1, "kind": "fence", "data": {"epoch": epoch}, "epoch": epoch})
        return len(log)

    def history(self, *, drained: bool = True) -> History:
        return History(list(self.ops), self.final, 0.0, drained)


def entry(seq: int, tag: str, i: int = 0, n: int = 1, epoch: int | None = None) -> dict[str, Any]:
    return {"seq": seq, "kind": "out", "data": {"b": tag, "i": i, "n": n}, "epoch": epoch}


def good() -> Builder:
    """A small correct history touching every checker."""
    b = Builder()
    acq = b.op("writer-0", "acquire", "s", result={"epoch": 1, "seq": 1})
    b.fence("s", 1)
    a1 = b.op("writer-0", "append", "s", result=3, n=2, fence=1)
    b.land("s", a1, 1)
    a2 = b.op("writer-0", "append", "s", result=4, n=1, fence=1, expect=3)
    b.land("s", a2, 1)
    p = b.op("prompter-0", "append", "s", result=5, n=1, key="k1", wake=0.0)
    b.land("s", p, None)
    b.op("prompter-0", "append", "s", result=5, n=1, key="k1", wake=0.0, tag=p.id, retry_of=p.id)
    b.op("reader-0", "read", "s", result=b.final["s"][:], after=0, limit=1000)
    b.op("reader-0", "read", "s", result=b.final["s"][2:4], after=2, limit=2)
    b.op("follower-0", "follow", "s", result=b.final["s"][:2], after=0)
    b.op("follower-0", "follow", "s", result=b.final["s"][2:], after=2)
    take = {"session": "s", "token": "t1", "attempt": 1, "expires": b.t + 2 + 5.0}
    b.op("worker-0", "take_wake", None, result=take, lease=5.0)
    acq2 = b.op("worker-0", "acquire", "s", result={"epoch": 2, "seq": 6}, lease="t1")
    b.fence("s", 2)
    step = b.op("worker-0", "append", "s", result=7, n=1, fence=2, lease="t1")
    b.land("s", step, 2)
    b.op("worker-0", "finish_wake", "s", token="t1")
    assert acq.result and acq2.result
    return b


def fails(
    checker: Callable[[History], list[Finding]], h: History, guarantee: str, *needles: str
) -> Finding:
    found = checker(h)
    assert found, f"{checker.__name__} found nothing wrong"
    text = "\n".join(v.render() for v in found)
    assert any(v.guarantee == guarantee for v in found), text
    for needle in needles:
        assert needle in text, text
    return found[0]


def test_good_history_passes_every_checker() -> None:
    h = good().history()
    for check in CHECKS:
        assert check.run(h) == [], check.name


def test_check_dense_gap_in_final_log() -> None:
    b = good()
    del b.final["s"][2]
    fails(chk.check_dense, b.history(), "W4", "not dense", "position 3 holds seq 4")


def test_check_dense_read_not_contiguous() -> None:
    b = good()
    log = b.final["s"]
    b.op("reader-0", "read", "s", result=[log[0], log[2]], after=0, limit=10)
    fails(chk.check_dense, b.history(), "W9", "not a contiguous slice", "reader-0")


def test_check_no_duplicates() -> None:
    b = good()
    dup = dict(b.final["s"][1], seq=8)
    b.final["s"].append(dup)
    fails(chk.check_no_duplicates, b.history(), "W4", "duplicated", "writer-0")


def test_check_no_duplicates_keyed_twice_is_w6() -> None:
    b = good()
    prompt = next(e for e in b.final["s"] if e["epoch"] is None)
    b.final["s"].append(dict(prompt, seq=8))
    fails(chk.check_no_duplicates, b.history(), "W6", "keyed call landed twice")


def test_check_no_duplicates_phantom_entry() -> None:
    b = good()
    b.final["s"].append(entry(8, "nobody#1"))
    fails(chk.check_no_duplicates, b.history(), "W4", "no call wrote")


def test_check_no_lost_acknowledged_append() -> None:
    b = good()
    lost = b.op("writer-0", "append", "s", result=8, n=1, fence=2)
    fails(chk.check_no_lost, b.history(), "W4", "not in the log", lost.id)


def test_check_no_lost_wrong_seq_and_expect() -> None:
    b = good()
    moved = b.op("writer-9", "append", "s", result=12, n=1, fence=2, expect=6)
    b.land("s", moved, 2)
    h = b.history()
    fails(chk.check_no_lost, h, "W4", "returned seq 12 but its last entry is at seq 8")
    fails(chk.check_no_lost, h, "W5", "expect=6 landed at seq 8")


def test_check_no_lost_fence_entry() -> None:
    b = good()
    b.op("writer-1", "acquire", "s", result={"epoch": 3, "seq": 8})
    fails(chk.check_no_lost, b.history(), "W1", "no fence entry at seq 8")


def test_check_readers_agree() -> None:
    b = good()
    changed = [dict(e) for e in b.final["s"][:3]]
    changed[2] = dict(changed[2], data={"b": "writer-0#2", "i": 0, "n": 2, "x": 1})
    reader = b.op("reader-1", "read", "s", result=changed, after=0, limit=10)
    fails(chk.check_readers_agree, b.history(), "W9", "final differs", reader.id)


def test_check_readers_agree_entry_vanished() -> None:
    b = good()
    ghost = entry(8, "writer-0#2", 0, 2, 1)
    b.op("follower-1", "follow", "s", result=[ghost], after=7)
    fails(chk.check_readers_agree, b.history(), "W10", "no such position")


def test_check_batches_atomic_interleaved() -> None:
    b = good()
    log = b.final["s"]
    log[2], log[3] = dict(log[3], seq=3), dict(log[2], seq=4)  # writer-0#3 inside writer-0#2
    fails(chk.check_batches_atomic, b.history(), "W4", "interleaved")


def test_check_batches_atomic_read_saw_half_a_batch() -> None:
    b = good()
    reader = b.op("reader-1", "read", "s", result=b.final["s"][:2], after=0, limit=1000)
    fails(chk.check_batches_atomic, b.history(), "W4", "middle of batch", reader.id)


def test_check_batches_atomic_allows_a_page_cut() -> None:
    b = good()
    b.op("reader-1", "read", "s", result=b.final["s"][:2], after=0, limit=2)
    assert chk.check_batches_atomic(b.history()) == []


def test_check_refused_no_trace() -> None:
    b = good()
    refused = b.op("writer-1", "append", "s", "failed", n=1, fence=1, error="Fenced")
    b.land("s", refused, 1)
    fails(chk.check_refused_no_trace, b.history(), "W2", "refused with Fenced", refused.id)


def test_check_refused_no_trace_conflict_seen_by_reader() -> None:
    b = good()
    refused = b.op("writer-1", "append", "s", "failed", n=1, fence=2, expect=3, error="Conflict")
    b.op("reader-1", "read", "s", result=[entry(8, refused.id, 0, 1, 2)], after=7, limit=5)
    fails(chk.check_refused_no_trace, b.history(), "W5", "seen by a reader")


def test_check_refused_no_trace_unfenced_refused_is_w3() -> None:
    b = good()
    b.op("prompter-1", "append", "s", "failed", n=1, key="k9", error="Fenced")
    fails(chk.check_refused_no_trace, b.history(), "W3", "unfenced append")


def test_check_indeterminate_partial_landing() -> None:
    b = good()
    cut = b.op("writer-0", "append", "s", "indeterminate", n=3, fence=2, error="kit timeout")
    b.final["s"].append(entry(8, cut.id, 0, 3, 2))
    fails(chk.check_indeterminate, b.history(), "W4", "landed 1 of its 3", cut.id)


def test_check_indeterminate_whole_or_nothing_is_fine() -> None:
    b = good()
    whole = b.op("writer-0", "append", "s", "indeterminate", n=2, fence=2, took=-1)
    b.land("s", whole, 2)
    b.op("writer-0", "append", "s", "indeterminate", n=2, fence=2, error="BackendUnavailable")
    h = b.history()
    for check in CHECKS:
        assert check.run(h) == [], check.name


def test_check_epochs_decrease_is_w8() -> None:
    b = good()
    late = b.op("writer-0", "append", "s", result=8, n=1, fence=1, at=1.5)
    b.land("s", late, 1)
    fails(chk.check_epochs, b.history(), "W8", "epoch 1 at seq 8 after epoch 2")


def test_check_epochs_takeover_epochs_and_real_time() -> None:
    b = good()
    b.op("writer-1", "acquire", "s", result={"epoch": 2, "seq": 8})
    b.fence("s", 2)
    h = b.history()
    fails(chk.check_epochs, h, "W1", "not above")
    fails(chk.check_epochs, h, "W1", "after an acquire had already returned epoch 2")


def test_check_epochs_entry_carries_its_fence() -> None:
    b = good()
    wrong = b.op("writer-0", "append", "s", result=8, n=1, fence=2)
    b.land("s", wrong, 3)
    fails(chk.check_epochs, b.history(), "W2", "given fence epoch 2")


def test_check_fenced_stays_out_stale_accepted() -> None:
    b = good()
    stale = b.op("writer-0", "append", "s", result=8, n=1, fence=1)
    b.land("s", stale, 2)  # a world that stamps the new epoch would hide it from W8
    fails(chk.check_fenced_stays_out, b.history(), "W2", "stale fence (epoch 1)", stale.id)


def test_check_fenced_stays_out_refused_then_accepted() -> None:
    b = Builder()
    b.op("w-0", "acquire", "s", result={"epoch": 1, "seq": 1})
    b.fence("s", 1)
    no = b.op("w-0", "append", "s", "failed", n=1, fence=1, error="Fenced")
    yes = b.op("w-0", "append", "s", result=2, n=1, fence=1)
    b.land("s", yes, 1)
    v = fails(chk.check_fenced_stays_out, b.history(), "W2", "refused, then accepted again")
    assert {o.id for o in v.ops} == {no.id, yes.id}


def test_check_follow_gap() -> None:
    b = good()
    log = b.final["s"]
    b.op("follower-1", "follow", "s", result=[log[0], log[2]], after=0)
    fails(chk.check_follow, b.history(), "W10", "a gap, a duplicate or out of order")


def test_check_follow_reconnect_resumes_wrong() -> None:
    b = good()
    log = b.final["s"]
    b.op("follower-1", "follow", "s", result=log[:2], after=0)
    b.op("follower-1", "follow", "s", result=log[3:5], after=2)
    fails(chk.check_follow, b.history(), "W10", "follow(after=2) yielded seqs [4,5]")


def test_check_reads_monotone() -> None:
    b = good()
    b.op("reader-0", "read", "s", result=b.final["s"][:3], after=0, limit=100)
    fails(chk.check_reads_monotone, b.history(), "W9", "saw seq 5, then a read found the log")


def test_check_wakes_never_early() -> None:
    b = good()
    req = b.op("poker-0", "wake", "q", delay=5.0)
    take = {"session": "q", "token": "tq", "attempt": 1, "expires": b.t + 10}
    taken = b.op("worker-0", "take_wake", None, result=take, lease=5.0)
    b.op("worker-0", "finish_wake", "q", token="tq")
    v = fails(chk.check_wakes_never_early, b.history(), "W11", "before any pending request")
    assert {o.id for o in v.ops} == {req.id, taken.id}


def test_check_wakes_never_early_consumed_request_does_not_count() -> None:
    b = good()
    b.op("poker-0", "wake", "q", delay=0.0)
    b.take("worker-0", "q", "a", 1, 9)
    b.op("poker-0", "wake", "q", delay=30.0)  # during the lease: due in 30 s (W13)
    b.op("worker-0", "finish_wake", "q", token="a")
    b.take("worker-1", "q", "b", 1, 9)
    fails(chk.check_wakes_never_early, b.history(), "W11")
    # ... whereas a second request made before the first take is coalesced: fine.
    b2 = good()
    b2.op("poker-0", "wake", "q", delay=0.0)
    b2.take("worker-0", "q", "a", 1, 9)
    b2.op("worker-0", "finish_wake", "q", token="a")
    assert chk.check_wakes_never_early(b2.history()) == []


def test_check_wakes_never_lost() -> None:
    b = good()
    b.take("worker-1", "q", "a", 1, 9)
    during = b.op("poker-0", "wake", "q", delay=0.0)
    b.op("worker-1", "finish_wake", "q", token="a")
    v = fails(chk.check_wakes_never_lost, b.history(), "W13", "while a lease was held")
    assert during in v.ops
    # An append's wake that was never delivered is W7.
    b2 = good()
    b2.op("prompter-0", "append", "q", result=1, n=1, key="kq", wake=0.0)
    b2.land("q", b2.ops[-1])
    fails(chk.check_wakes_never_lost, b2.history(), "W7", "never delivered")


def test_check_wakes_never_lost_needs_a_drained_history() -> None:
    b = good()
    b.op("poker-0", "wake", "q", delay=0.0)
    found = [v for c, vs in chk.run_checks(b.history(drained=False)) for v in vs]
    assert found == []
    assert [v for c, vs in chk.run_checks(b.history(drained=True)) for v in vs]


def test_check_lease_handed_out_twice() -> None:
    b = good()
    b.op("poker-0", "wake", "q", delay=0.0)
    b.take("worker-1", "q", "a", 1, 1 + 30)
    b.take("worker-2", "q", "b", 2, 1 + 30)
    b.op("worker-2", "finish_wake", "q", token="b")
    fails(chk.check_lease_redelivery, b.history(), "W12", "handed out again", "before the first")


def test_check_lease_dead_worker_not_redelivered() -> None:
    b = good()
    b.op("poker-0", "wake", "q", delay=0.0)
    dead = b.take("worker-1", "q", "a", 1, 2)
    v = fails(chk.check_lease_redelivery, b.history(), "W12", "was not delivered again")
    assert dead in v.ops
    assert chk.check_lease_redelivery(b.history(drained=False)) == []


def test_check_lease_attempt_and_stale_token() -> None:
    b = good()
    b.op("poker-0", "wake", "q", delay=0.0)
    b.take("worker-1", "q", "a", 1, 1.5)
    b.take("worker-2", "q", "b", 1, 5)
    b.op("worker-1", "renew_wake", "q", result={"expires": b.t + 9}, token="a", lease=5.0)
    b.op("worker-2", "finish_wake", "q", token="b")
    h = b.history()
    fails(chk.check_lease_redelivery, h, "W12", "with attempt 1, not 2")
    fails(chk.check_lease_redelivery, h, "W12", "renew_wake of a lease succeeded after")


def test_check_lease_redelivery_good() -> None:
    b = good()
    b.op("poker-0", "wake", "q", delay=0.0)
    b.take("worker-1", "q", "a", 1, 1.5)
    b.take("worker-2", "q", "b", 2, 5)
    b.op("worker-1", "renew_wake", "q", "failed", error="LeaseLost", token="a", lease=5.0)
    b.op("worker-2", "finish_wake", "q", token="b")
    h = b.history()
    for check in CHECKS:
        assert check.run(h) == [], check.name


def test_check_new_epoch_refuses_old() -> None:
    b = good()  # worker-0 holds lease t1 with epoch 2
    b.take("worker-1", "s", "t2", 2, 9)
    b.op("worker-1", "acquire", "s", result={"epoch": 3, "seq": 8}, lease="t2")
    b.fence("s", 3)
    zombie = b.op("worker-0", "append", "s", result=9, n=1, fence=2, lease="t1")
    b.land("s", zombie, 2)
    v = fails(chk.check_new_epoch_refuses_old, b.history(), "W12", "old worker's append")
    assert zombie in v.ops


def test_check_errors_typed() -> None:
    b = good()
    leak = b.op(
        "reader-0",
        "read",
        "s",
        "indeterminate",
        after=0,
        limit=5,
        typed=False,
        error="asyncpg.exceptions.ConnectionDoesNotExistError: closed",
    )
    v = fails(chk.check_errors_typed, b.history(), "W16", "ConnectionDoesNotExistError")
    assert leak in v.ops


def test_finding_render_names_guarantee_and_operations() -> None:
    b = good()
    stale = b.op("writer-0", "append", "s", result=8, n=1, fence=1)
    b.land("s", stale, 1)
    text = "\n".join(v.render() for v in chk.check_epochs(b.history()))
    assert text.startswith("W8: session s: epoch 1 at seq 8 after epoch 2")
    assert "writer-0" in text and "append(s: " in text and "final log:" in text


def test_a_wake_finding_shows_its_sessions_wake_history_before_it() -> None:
    """One line was not enough to diagnose an early wake (W11): with the history, a
    finding about one session's wake lists that session's requests, takes,
    renewals and finishes up to then, with times and results, each renewal and
    finish naming its take; other sessions' operations stay out."""
    b = good()
    b.op("poker-0", "wake", "other", delay=0.0)
    asked = b.op("poker-0", "wake", "q", delay=0.0)
    prompt = b.op("prompter-0", "append", "q", result=1, n=1, key="kq", wake=0.3)
    first = b.take("worker-0", "q", "a", 1, 9)
    renewed = b.op("worker-0", "renew_wake", "q", result={"expires": b.t + 9}, token="a")
    refused = b.op("worker-0", "finish_wake", "q", "failed", error="LeaseLost", token="a")
    finished = b.op("worker-0", "finish_wake", "q", token="a")
    early = b.take("worker-1", "q", "b", 1, 9)
    h = b.history()
    [found] = chk.check_wakes_never_early(h)
    assert found.ops == [early]  # the requests were consumed: the finding alone says little
    alone, context = found.render(h.t0, h).split("\n  session q's wake requests, takes, ")
    assert alone == found.render(h.t0)
    lines = context.splitlines()
    lease = f"  (lease of #{first.id})"
    timeline = [
        "    " + asked.describe(h.t0),
        "    " + prompt.describe(h.t0),
        "    " + first.describe(h.t0),
        "    " + renewed.describe(h.t0) + lease,
        "    " + refused.describe(h.t0) + lease,
        "    " + finished.describe(h.t0) + lease,
        "  * " + early.describe(h.t0),
    ]
    assert lines == ["renewals and finishes up to then:", *timeline]
    assert lines[1].startswith("    [  15.000 ..   15.010] poker-0        wake(q: delay=0.0) ok")
    assert "append(q: n=1, key=kq, wake=0.3, " in lines[2] and ") ok -> 1  #" in lines[2]
    assert "renew_wake(q: token=a) ok -> expires=26.0" in lines[4]
    assert "finish_wake(q: token=a) failed (LeaseLost)" in lines[5]
    assert "take_wake(q: ) ok -> session=q, attempt=1, expires=29.0" in lines[7]
    for _ in range(hist.CONTEXT):  # earlier still: the oldest are left out
        b.op("poker-0", "wake", "q", delay=0.0, at=0.5)
    h = b.history()
    [found] = chk.check_wakes_never_early(h)
    lines = found.render(h.t0, h).splitlines()
    assert lines[3] == "    (7 earlier not shown)" and len(lines) == 4 + hist.CONTEXT
    assert lines[-len(timeline) :] == timeline


# -- recording ------------------------------------------------------------------------


async def test_recorder_outcomes_and_a_killed_call(tmp_path: Path) -> None:
    path = str(tmp_path / "rec.jsonl")
    sink = FileSink(path)
    rec = Recorder("writer-0", sink)

    async def ok() -> int:
        return 7

    async def fenced() -> int:
        raise Fenced("s", 1, 2)

    async def down() -> int:
        raise BackendUnavailable("cut")

    async def leak() -> int:
        raise KeyError("driver")

    async def driver_timeout() -> int:
        raise TimeoutError("driver gave up")

    async def hang() -> int:
        await asyncio.sleep(10)
        return 0

    assert (await rec.run("append", "s", {"tag": "a"}, ok, within=1)).outcome == "ok"
    assert (await rec.run("append", "s", {}, fenced, within=1)).outcome == "failed"
    assert (await rec.run("append", "s", {}, down, within=1)).outcome == "indeterminate"
    assert (await rec.run("read", "s", {}, leak, within=1)).outcome == "indeterminate"
    assert (await rec.run("read", "s", {}, hang, within=0.05)).outcome == "indeterminate"
    assert (await rec.run("read", "s", {}, driver_timeout, within=1)).outcome == "indeterminate"
    task = asyncio.create_task(rec.run("append", "s", {}, hang, within=5))
    await asyncio.sleep(0.05)
    task.cancel()  # a simulated crash: no end is recorded
    with pytest.raises(asyncio.CancelledError):
        await task
    sink.close()
    torn = '{"e":"e","id":"writer-0#7","t":1'  # a torn last line, as a kill may leave
    (tmp_path / "rec.jsonl").write_text((tmp_path / "rec.jsonl").read_text() + torn)
    ops = load_records(read_record_file(path))
    assert [(o.outcome, o.error) for o in ops] == [
        ("ok", None),
        ("failed", "Fenced"),
        ("indeterminate", "BackendUnavailable"),
        ("indeterminate", "builtins.KeyError: 'driver'"),
        ("indeterminate", "kit timeout"),
        ("indeterminate", "builtins.TimeoutError: driver gave up"),
        ("indeterminate", None),
    ]
    assert ops[0].result == 7 and ops[6].end is None
    assert [o.typed for o in ops] == [True, True, True, False, True, False, True]
    h = History(ops, {}, 0.0)
    assert [v.guarantee for v in chk.check_errors_typed(h)] == ["W16"]
    assert "2 operations" in chk.check_errors_typed(h)[0].message


def test_list_sink_records_are_json() -> None:
    sink = ListSink()
    rec = Recorder("p", sink)
    rec.record("follow", "s", {"after": 0}, 1.0, "ok", [entry(1, "x")])
    assert json.loads(json.dumps(sink.records))[1]["r"][0]["seq"] == 1
