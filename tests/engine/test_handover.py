"""Handing a session from one worker process to another: replacement, SIGTERM,
and a client that dies right after its prompt was accepted."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
import textwrap
import time
from asyncio.subprocess import PIPE
from pathlib import Path

import crash_agent
import pytest
from conftest import HERE, REPO, SURVIVOR_LEASE, Proc, client, read_jsonl

from fxworld.types import Entry

pytestmark = pytest.mark.timeout(120)


async def wait_until(check, limit: float = 30.0, what: str = "condition"):  # type: ignore[no-untyped-def]
    end = time.monotonic() + limit
    while True:
        got = await check()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def freeze(proc: Proc, world_url: str) -> None:
    """SIGSTOP ``proc``, but never inside an SQLite write transaction: a process
    frozen there holds the database's write lock, and nobody could take over."""
    if not world_url.startswith("sqlite:///"):
        proc.signal(signal.SIGSTOP)
        return
    path = world_url.removeprefix("sqlite:///")
    for _ in range(100):
        proc.signal(signal.SIGSTOP)
        try:
            probe = sqlite3.connect(path, timeout=0.2)
            try:
                probe.execute("BEGIN IMMEDIATE")
                probe.rollback()
                return
            finally:
                probe.close()
        except sqlite3.OperationalError:  # frozen holding the lock: try again
            proc.signal(signal.SIGCONT)
            await asyncio.sleep(0.01)
    raise AssertionError("the worker always held the write lock")


async def entries(url_agent, sid: str) -> list[Entry]:  # type: ignore[no-untyped-def]
    return await url_agent.world.read(sid, 0, limit=10_000)


async def test_two_workers_one_session_only_the_newest_writes(
    engine_world_url: str, start_worker, tmp_path: Path
) -> None:
    """A worker frozen past its lease is replaced; when it wakes up, its next write
    is refused and it stops: it runs nothing more and writes nothing more."""
    agent = client(engine_world_url)
    turn = agent.session().prompt("Please charge order A.")
    sid = (await turn.accepted).session_id
    runs_file = tmp_path / "runs.jsonl"

    old = start_worker(env={"ENGINE_TEST_BLOCK": "lookup:4"})

    async def old_in_lookup() -> bool:
        return any(r["pid"] == old.pid for r in read_jsonl(runs_file))

    await wait_until(old_in_lookup, what="the first worker inside lookup")
    await freeze(old, engine_world_url)  # frozen (a GC pause, a stalled VM...) past its lease
    new = start_worker(lease=SURVIVOR_LEASE)
    assert await asyncio.wait_for(turn, 60) == crash_agent.FINAL
    old.signal(signal.SIGCONT)
    old.wait_for_log("replaced by another worker")
    await asyncio.sleep(0.5)  # room for any wrong write to land

    log = await entries(agent, sid)
    fences = [e for e in log if e.kind == "fence"]
    assert len(fences) == 2
    old_epoch, new_epoch = fences[0].data["epoch"], fences[1].data["epoch"]
    after_takeover = [e for e in log if e.seq > fences[1].seq]
    assert all(e.epoch in (new_epoch, None) for e in after_takeover), "old writer wrote late"
    assert not [e for e in log if e.epoch == old_epoch and e.kind == "tool.finished"]

    runs = read_jsonl(runs_file)
    assert [(r["tool"], r["pid"]) for r in runs] == [
        ("lookup", old.pid),  # frozen inside, finished after it was replaced
        ("lookup", new.pid),  # idempotent: run again, same execution id
        ("charge", new.pid),  # only the new worker went on
    ]
    assert runs[0]["execution_id"] == runs[1]["execution_id"]
    for p in (old, new):
        p.signal(signal.SIGTERM)
        assert await p.wait() == 0, p.text()


async def test_prompt_accepted_then_client_killed_is_answered(
    engine_world_url: str, start_worker, tmp_path: Path
) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal
        import fxworld, crash_agent
        from fxworld import Agent
        async def main():
            agent = Agent(crash_agent.agent.model, world=fxworld.open_world({engine_world_url!r}))
            accepted = await agent.session().prompt("Please charge order A.").accepted
            print(accepted.session_id, accepted.cursor, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)  # dies the moment it was acknowledged
        asyncio.run(main())
        """
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(HERE), str(REPO)]),
        ENGINE_TEST_DIR=str(tmp_path),
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, env=env, stdout=PIPE, stderr=PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == -signal.SIGKILL, err.decode()
    sid, cursor = out.decode().split()

    worker = start_worker(lease=SURVIVOR_LEASE)
    agent = client(engine_world_url)
    events = [e async for e in agent.session(sid).stream(cursor, until="turn")]
    assert events[-1].kind == "turn.finished"
    assert events[-1].data["text"] == crash_agent.FINAL
    prompts = [e for e in await entries(agent, sid) if e.kind == "prompt"]
    assert len(prompts) == 1
    worker.signal(signal.SIGTERM)
    assert await worker.wait() == 0


async def test_sigterm_hands_over_at_once(
    engine_world_url: str, start_worker, tmp_path: Path
) -> None:
    """SIGTERM while the model's text streams: the worker stops at once, marks the
    cut text discarded, hands the session back, and a waiting worker continues
    well before the lease (15 s here) would have run out."""
    agent = client(engine_world_url)
    env = {"ENGINE_TEST_TEXT_DELAY": "0.8"}  # 4 s of streaming to stop it in (then fast)
    workers = [start_worker(lease=15.0, env=env), start_worker(lease=15.0, env=env)]
    for w in workers:
        w.wait_for_log("worker ready")
    turn = agent.session().prompt("Please charge order A.")
    sid = (await turn.accepted).session_id

    async def streaming() -> bool:
        return any(e.kind == "text" for e in await entries(agent, sid))

    await wait_until(streaming, what="text to stream")
    holder_pid = read_jsonl(tmp_path / "runs.jsonl")[0]["pid"]
    holder = next(w for w in workers if w.pid == holder_pid)
    other = next(w for w in workers if w.pid != holder_pid)
    (tmp_path / "fast").touch()  # the other worker need not stream slowly
    sent = time.time()
    holder.signal(signal.SIGTERM)
    assert await holder.wait() == 0, holder.text()
    assert await asyncio.wait_for(turn, 60) == crash_agent.FINAL

    log = await entries(agent, sid)
    fences = [e for e in log if e.kind == "fence"]
    assert len(fences) == 2
    handover = fences[1].at.timestamp() - sent
    print(f"\nSIGTERM -> the other worker continues: {handover * 1000:.0f} ms")
    assert handover < 10.0  # liveness only; the figure is in benchmarks/bench_engine.py
    kinds = [e.kind for e in log]
    yielded = [e for e in log if e.kind == "turn.yielded"]
    assert [e.data["reason"] for e in yielded] == ["handover"]
    assert kinds.count("text.discarded") == 1
    assert kinds.count("turn.finished") == 1
    runs = read_jsonl(tmp_path / "runs.jsonl")
    assert [r["tool"] for r in runs] == ["lookup", "charge"]
    assert all(r["pid"] == holder_pid for r in runs)
    other.signal(signal.SIGTERM)
    assert await other.wait() == 0
