"""Approvals and stop across processes, on every engine world (SQLite, PostgreSQL, ...).

Workers are real ``fxworld worker`` processes running tests/engine/crash_agent.py;
decisions and stops come from the test process or from processes of their own
(tests/engine/decide.py). A turn that waits for a person holds no worker: the
decision's wake (or the timeout's delayed wake) brings one back.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import crash_agent
import pytest
from conftest import HERE, REPO, SURVIVOR_LEASE, client, read_jsonl
from test_crash import assert_no_gap_no_dup, read_with_reconnect

from fxworld import TurnStopped
from fxworld.errors import AlreadyDecided, ApprovalExpired, UnknownCall
from fxworld.testing import moved_clock
from fxworld.types import Entry
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

APPROVAL = {"ENGINE_TEST_SCRIPT": "approval"}


async def wait_for_kind(agent: Any, sid: str, kind: str) -> Entry:
    end = time.monotonic() + 30.0
    while time.monotonic() < end:
        for e in await agent.world.read(sid, 0, limit=10_000):
            if e.kind == kind:
                return e
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {kind} entry in 30 s")


async def decide(url: str, sid: str, action: str, xid: str = "", go_at: float = 0.0) -> str:
    """Run tests/engine/decide.py in a process of its own; what it printed."""
    env = dict(os.environ, GO_AT=str(go_at))
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(REPO), env.get("PYTHONPATH", "")])
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "decide.py"),
        url,
        sid,
        action,
        xid,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, out.decode()
    return out.decode().strip().splitlines()[-1]


async def prompted(url: str, text: str) -> tuple[Any, Any, str]:
    """A client on the world at ``url``, its turn for ``text`` and the session id."""
    agent = client(url)
    turn = agent.session().prompt(text)
    return agent, turn, (await turn.accepted).session_id


async def stop_worker(worker: Any) -> None:
    """SIGTERM: the worker hands back what it runs and exits cleanly."""
    worker.signal(signal.SIGTERM)
    assert await worker.wait() == 0, worker.text()


async def stored(agent: Any, sid: str) -> list[Entry]:
    return list(await agent.world.read(sid, 0, limit=10_000))


def refunds(tmp_path: Path) -> list[dict[str, Any]]:
    return [r for r in read_jsonl(tmp_path / "runs.jsonl") if r["tool"] == "refund"]


# -- approvals ----------------------------------------------------------------------


async def test_a_decision_from_another_process_while_no_worker_runs(
    engine_world_url: str, start_worker, tmp_path: Path
) -> None:
    agent, turn, sid = await prompted(engine_world_url, "Please refund order A.")
    first = start_worker(lease=SURVIVOR_LEASE, env=APPROVAL)
    requested = await wait_for_kind(agent, sid, "approval.requested")
    first.wait_for_log("holding nothing")
    await stop_worker(first)
    # the waiting turn holds nothing: no wake is due, nobody polls
    assert await agent.world.take_wake(lease=1.0) is None
    [pending] = await agent.session(sid).pending_approvals()
    xid = requested.data["execution_id"]
    assert (pending.execution_id, pending.name, pending.input) == (
        xid,
        "refund",
        {"id": "A", "cents": 500},
    )
    assert pending.expires_at is None and pending.requested_at.tzinfo is not None
    assert refunds(tmp_path) == []

    assert await decide(engine_world_url, sid, "approve", xid) == "ok"
    assert await decide(engine_world_url, sid, "approve", xid) == "ok"  # the same: nothing
    second = start_worker(lease=SURVIVOR_LEASE, env=APPROVAL)
    assert await asyncio.wait_for(turn, 60) == crash_agent.REFUND_FINAL
    await stop_worker(second)

    [run] = refunds(tmp_path)
    assert run["execution_id"] == xid and run["pid"] == second.pid
    entries = await stored(agent, sid)
    decided = [e for e in entries if e.kind == "approval.decided"]
    assert len(decided) == 1 and decided[0].data["approved"] is True
    assert decided[0].epoch is None  # unfenced
    assert await agent.session(sid).pending_approvals() == []
    with pytest.raises(AlreadyDecided):
        await agent.session(sid).deny(xid)


async def test_two_decisions_racing_from_two_processes(
    engine_world_url: str, start_worker, tmp_path: Path
) -> None:
    agent, turn, sid = await prompted(engine_world_url, "Please refund order A.")
    worker = start_worker(lease=SURVIVOR_LEASE, env=APPROVAL)
    xid = (await wait_for_kind(agent, sid, "approval.requested")).data["execution_id"]
    go_at = time.time() + 1.5  # both processes are up and have read the log by then
    outcomes = await asyncio.gather(
        decide(engine_world_url, sid, "approve", xid, go_at),
        decide(engine_world_url, sid, "deny", xid, go_at),
    )
    assert sorted(outcomes) == ["AlreadyDecided", "ok"], outcomes
    approved = outcomes[0] == "ok"
    assert await asyncio.wait_for(turn, 60) == crash_agent.REFUND_FINAL
    await stop_worker(worker)

    entries = await stored(agent, sid)
    decided = [e for e in entries if e.kind == "approval.decided"]
    assert len(decided) == 1 and decided[0].data["approved"] is approved
    assert len(refunds(tmp_path)) == (1 if approved else 0)
    heard = read_jsonl(tmp_path / "model.jsonl")[-1]["messages"]
    [result] = [m for m in heard if m["role"] == "tool"]
    assert result["is_error"] is not approved
    if not approved:
        assert "denied: denied by" in result["text"]


@pytest.mark.parametrize(
    "point", ["after-approval-requested", "before-approved-call", "in-tool:refund"]
)
async def test_a_worker_killed_around_an_approval_never_runs_the_call_twice(
    point: str, engine_world_url: str, start_worker, tmp_path: Path
) -> None:
    agent, turn, sid = await prompted(engine_world_url, "Please refund order A.")
    first = start_worker(env={**APPROVAL, "FXWORLD_TEST_CRASH_AT": point})
    xid = (await wait_for_kind(agent, sid, "approval.requested")).data["execution_id"]
    await agent.session(sid).approve(xid, note="go ahead")
    assert await first.wait() == -signal.SIGKILL, first.text()
    second = start_worker(lease=SURVIVOR_LEASE, env=APPROVAL)
    assert await asyncio.wait_for(turn, 60) == crash_agent.REFUND_FINAL
    await stop_worker(second)

    runs = refunds(tmp_path)
    kinds = [e.kind for e in await stored(agent, sid)]
    assert kinds.count("approval.requested") == 1 and kinds.count("approval.decided") == 1
    if point == "in-tool:refund":
        # not idempotent: it ran once, in the killed worker, and never again
        assert [r["pid"] for r in runs] == [first.pid]
        assert kinds.count("tool.interrupted") == 1
        heard = read_jsonl(tmp_path / "model.jsonl")[-1]["messages"]
        assert "may have partly run" in [m for m in heard if m["role"] == "tool"][-1]["text"]
    else:
        assert [r["pid"] for r in runs] == [second.pid]
        assert "tool.interrupted" not in kinds


async def test_an_approval_timeout_passes_while_no_process_is_up(
    engine_world_url: str, start_worker, tmp_path: Path
) -> None:
    env = {**APPROVAL, "ENGINE_TEST_APPROVAL_TIMEOUT": "2"}
    agent, turn, sid = await prompted(engine_world_url, "Please refund order A.")
    first = start_worker(lease=SURVIVOR_LEASE, env=env)
    requested = await wait_for_kind(agent, sid, "approval.requested")
    assert requested.data["timeout"] == 2
    # read at once: stopping a worker on a loaded machine can take longer than 2 s
    [pending] = await agent.session(sid).pending_approvals()
    assert pending.expires_at is not None
    assert 1.5 < (pending.expires_at - pending.requested_at).total_seconds() < 2.5
    expires_at = pending.expires_at
    first.wait_for_log("holding nothing")
    await stop_worker(first)
    await wait_until(lambda: datetime.now(UTC) > expires_at, 10)  # no process is up

    second = start_worker(lease=SURVIVOR_LEASE, env=env)
    assert await asyncio.wait_for(turn, 60) == crash_agent.REFUND_FINAL
    await stop_worker(second)
    assert refunds(tmp_path) == []
    [decided] = [e for e in await stored(agent, sid) if e.kind == "approval.decided"]
    assert decided.data["approved"] is False
    assert decided.data["reason"] == "no decision within 2 s"
    heard = read_jsonl(tmp_path / "model.jsonl")[-1]["messages"]
    [result] = [m for m in heard if m["role"] == "tool"]
    assert result["is_error"] and "no decision within 2 s" in result["text"]
    assert decided.data["expired"] is True and decided.epoch is not None  # the worker's
    with pytest.raises(ApprovalExpired):  # too late: the timeout decided
        await agent.session(sid).approve(requested.data["execution_id"])


async def test_an_expired_approval_cannot_be_approved(
    engine_world_url: str, start_worker, tmp_path: Path
) -> None:
    """Past ``expires_at`` with no worker up, the call is not pending, an approval
    is refused, and the timeout's denial (written by the refused process) is
    what the next worker's model hears: the tool never runs. This process's
    engine clock is moved past ``expires_at``; the other processes only read the
    denial it wrote."""
    env = {**APPROVAL, "ENGINE_TEST_APPROVAL_TIMEOUT": "60"}
    agent, turn, sid = await prompted(engine_world_url, "Please refund order A.")
    first = start_worker(lease=SURVIVOR_LEASE, env=env)
    xid = (await wait_for_kind(agent, sid, "approval.requested")).data["execution_id"]
    first.wait_for_log("holding nothing")
    await stop_worker(first)
    session = agent.session(sid)
    [pending] = await session.pending_approvals()
    assert pending.expires_at is not None
    with moved_clock() as clock:  # no process is up
        clock.advance((pending.expires_at - datetime.now(UTC)).total_seconds() + 1)
        assert await session.pending_approvals() == []
        with pytest.raises(ApprovalExpired) as refused:
            await session.approve(xid, note="too late")
    assert isinstance(refused.value, AlreadyDecided) and refused.value.approved is False
    assert await decide(engine_world_url, sid, "approve", xid) == "ApprovalExpired"
    assert await decide(engine_world_url, sid, "deny", xid) == "ApprovalExpired"
    [decided] = [e for e in await stored(agent, sid) if e.kind == "approval.decided"]
    assert decided.data == {
        **decided.data,
        "approved": False,
        "expired": True,
        "reason": "no decision within 60 s",
    }
    assert decided.epoch is None  # written by the refused approve, not by a worker

    second = start_worker(lease=SURVIVOR_LEASE, env=env)
    assert await asyncio.wait_for(turn, 60) == crash_agent.REFUND_FINAL
    await stop_worker(second)
    assert refunds(tmp_path) == []
    kinds = [e.kind for e in await stored(agent, sid)]
    assert kinds.count("approval.decided") == 1 and "tool.started" not in kinds
    heard = read_jsonl(tmp_path / "model.jsonl")[-1]["messages"]
    [result] = [m for m in heard if m["role"] == "tool"]
    assert result["is_error"] and "no decision within 60 s" in result["text"]


# -- a redeploy changes the tools under a waiting call ------------------------------


async def redeployed_call_waits(
    url: str, start_worker: Any, tmp_path: Path, redeploy: dict[str, str]
) -> None:
    """Agent v1 parks a refund and dies; agent v2 (``redeploy``'s tools) takes the
    session over: the call waits for a decision all the same, and runs once
    approved."""
    agent, turn, sid = await prompted(url, "Please refund order A.")
    v1 = start_worker(env={**APPROVAL, "FXWORLD_TEST_CRASH_AT": "after-approval-requested"})
    xid = (await wait_for_kind(agent, sid, "approval.requested")).data["execution_id"]
    assert await v1.wait() == -signal.SIGKILL, v1.text()
    v2 = start_worker(lease=SURVIVOR_LEASE, env={**APPROVAL, **redeploy})
    v2.wait_for_log("holding nothing")  # once v1's lease ran out
    kinds = [e.kind for e in await stored(agent, sid)]
    assert "approval.decided" not in kinds and "tool.started" not in kinds
    assert refunds(tmp_path) == []
    assert [a.execution_id for a in await agent.session(sid).pending_approvals()] == [xid]

    await agent.session(sid).approve(xid)
    assert await asyncio.wait_for(turn, 60) == crash_agent.REFUND_FINAL
    await stop_worker(v2)
    assert [(r["execution_id"], r["pid"]) for r in refunds(tmp_path)] == [(xid, v2.pid)]


async def test_a_requested_call_waits_after_a_redeploy_without_needs_approval(
    engine_world_url: str, start_worker, tmp_path: Path
) -> None:
    await redeployed_call_waits(
        engine_world_url, start_worker, tmp_path, {"ENGINE_TEST_REFUND_APPROVAL": "0"}
    )


async def test_a_requested_call_waits_after_a_redeploy_beside_another_approval_tool(
    engine_world_url: str, start_worker, tmp_path: Path
) -> None:
    redeploy = {"ENGINE_TEST_REFUND_APPROVAL": "0", "ENGINE_TEST_OTHER_APPROVAL": "1"}
    await redeployed_call_waits(engine_world_url, start_worker, tmp_path, redeploy)


# -- stop -----------------------------------------------------------------------------


def stop_delay(entries: list[Entry]) -> float:
    """Seconds from stop.requested to turn.stopped, as the world committed them."""
    asked = next(e for e in entries if e.kind == "stop.requested")
    ended = next(e for e in entries if e.kind == "turn.stopped")
    return (ended.at - asked.at).total_seconds()


async def test_stop_while_the_answer_streams_and_a_reader_reconnects(
    engine_world_url: str, start_worker, tmp_path: Path
) -> None:
    agent, turn, sid = await prompted(engine_world_url, "Tell me everything.")
    reader = asyncio.create_task(read_with_reconnect(agent, sid, drop_after=6))
    worker = start_worker(lease=SURVIVOR_LEASE, env={"ENGINE_TEST_SCRIPT": "long"})
    for _ in range(600):
        if [e.kind for e in await stored(agent, sid)].count("text") >= 3:
            break
        await asyncio.sleep(0.02)
    await agent.session(sid).stop(reason="enough")
    await agent.session(sid).stop(reason="enough")  # twice: written once
    with pytest.raises(TurnStopped) as stopped:
        await asyncio.wait_for(turn, 30)
    seen = await asyncio.wait_for(reader, 30)

    entries = await stored(agent, sid)
    kinds = [e.kind for e in entries]
    assert kinds.count("stop.requested") == 1 and kinds[-1] == "turn.stopped"
    assert "message" not in kinds and "text.discarded" not in kinds  # the saved text stays
    saved = "".join(e.data["text"] for e in entries if e.kind == "text")
    assert saved and crash_agent.LONG.startswith(saved) and saved != crash_agent.LONG
    assert stopped.value.text == saved == entries[-1].data["text"]
    assert stopped.value.reason == "enough" and isinstance(stopped.value.text, str)
    # a reader that dropped and reconnected saw the stopped text once, and the end
    assert_no_gap_no_dup(sid, seen, await agent.session(sid).read())
    assert "".join(e.data["text"] for e in seen if e.kind == "text") == saved
    assert seen[-1].kind == "turn.stopped"
    assert stop_delay(entries) < 5.0  # loose: the benchmark measures it

    # the next turn: the model hears its cut answer, and that the user cut it
    assert await asyncio.wait_for(agent.session(sid).prompt("Short, please."), 30) == (
        crash_agent.LONG_AFTER
    )
    await stop_worker(worker)
    heard = read_jsonl(tmp_path / "model.jsonl")[-1]["messages"]
    assert [m["role"] for m in heard] == ["user", "assistant", "user"]
    assert heard[1]["text"] == saved
    assert "stopped your previous answer" in heard[2]["text"]


async def test_stop_during_a_sync_tool_lets_it_finish_and_starts_no_other(
    engine_world_url: str, start_worker, tmp_path: Path
) -> None:
    agent, turn, sid = await prompted(engine_world_url, "Please charge order A.")
    worker = start_worker(lease=SURVIVOR_LEASE, env={"ENGINE_TEST_BLOCK": "lookup:1.5"})
    await wait_for_kind(agent, sid, "tool.started")
    await agent.session(sid).stop()
    with pytest.raises(TurnStopped):
        await asyncio.wait_for(turn, 30)
    await stop_worker(worker)
    entries = await stored(agent, sid)
    kinds = [e.kind for e in entries]
    assert kinds[-1] == "turn.stopped" and kinds.count("tool.started") == 1
    [finished] = [e for e in entries if e.kind == "tool.finished"]
    assert finished.data["name"] == "lookup" and not finished.data["is_error"]  # saved
    assert [r["tool"] for r in read_jsonl(tmp_path / "runs.jsonl")] == ["lookup"]


async def test_stop_while_a_turn_waits_for_approval_closes_it(
    engine_world_url: str, start_worker, tmp_path: Path
) -> None:
    agent, turn, sid = await prompted(engine_world_url, "Please refund order A.")
    worker = start_worker(lease=SURVIVOR_LEASE, env=APPROVAL)
    xid = (await wait_for_kind(agent, sid, "approval.requested")).data["execution_id"]
    worker.wait_for_log("holding nothing")
    await agent.session(sid).stop()
    with pytest.raises(TurnStopped):
        await asyncio.wait_for(turn, 30)
    assert await agent.session(sid).pending_approvals() == []
    with pytest.raises(UnknownCall):
        await agent.session(sid).approve(xid)
    assert await decide(engine_world_url, sid, "deny", xid) == "UnknownCall"
    await stop_worker(worker)
    assert refunds(tmp_path) == []
    kinds = [e.kind for e in await stored(agent, sid)]
    assert kinds[-1] == "turn.stopped" and "approval.decided" not in kinds


async def test_stop_with_no_turn_running_does_nothing(
    engine_world_url: str, start_worker, tmp_path: Path
) -> None:
    agent = client(engine_world_url)
    session = agent.session()
    await session.stop()  # an empty session
    assert await session.read() == []
    turn = session.prompt("Please charge order A.")
    await turn.accepted
    worker = start_worker(lease=SURVIVOR_LEASE)
    assert await asyncio.wait_for(turn, 60) == crash_agent.FINAL
    before = await session.read()
    assert await decide(engine_world_url, session.id, "stop") == "ok"  # after the turn
    await session.stop()
    assert await session.read() == before
    await stop_worker(worker)
