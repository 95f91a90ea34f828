"""A worker SIGKILLed at every step boundary: the turn still ends correctly.

Each case runs a real ``fxworld worker`` process that kills itself (SIGKILL) at a
chosen point, then a second worker that continues after the lease runs out. A
reader follows the stream throughout, drops its connection part-way and reconnects
from its last cursor.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path

import crash_agent
import pytest
from conftest import SURVIVOR_LEASE, client, read_jsonl

from fxworld import Agent, StreamEvent
from fxworld.engine import decode_cursor

pytestmark = pytest.mark.timeout(120)


async def read_with_reconnect(agent: Agent, sid: str, drop_after: int) -> list[StreamEvent]:
    """Follow the stream until the turn ends, reconnecting once from a cursor."""
    seen: list[StreamEvent] = []
    async with contextlib.aclosing(agent.session(sid).stream(until="turn")) as events:
        async for ev in events:
            seen.append(ev)
            if len(seen) == drop_after:
                break  # the connection drops
    if seen and seen[-1].kind not in ("turn.finished", "turn.failed"):
        async for ev in agent.session(sid).stream(seen[-1].cursor, until="turn"):
            seen.append(ev)
    return seen


def assert_no_gap_no_dup(sid: str, seen: list[StreamEvent], stored: list[StreamEvent]) -> None:
    seqs = [decode_cursor(sid, e.cursor) for e in seen]
    assert seqs == list(range(1, len(seqs) + 1)), f"gap or duplicate in {seqs}"
    assert [(e.kind, e.data) for e in seen] == [(e.kind, e.data) for e in stored[: len(seen)]]


CASES = {
    # point: what the second worker must see and do
    "after-turn-started": "nothing of the turn lost",
    "before-message": "the model is asked again; nothing ran",
    # the reply and the start of its calls are one append (a tool step = 2 appends)
    "after-message": "reply + lookup started, lookup not run: it runs (attempt 2), once",
    "after-message#2": "reply + charge started, charge not run: never run, the model hears it",
    "after-message#3": "final reply + turn.finished: nothing more is done or shown",
    "in-tool:lookup": "idempotent: runs again with the same execution_id",
    "in-tool:charge": "not idempotent: never runs again; the model hears it",
    "after-tool-finished": "the finished tool is not run again",
    "after-chunk#2": "text cut mid-stream is discarded and the call made again",
}


@pytest.mark.parametrize("point", list(CASES))
async def test_crash_at_step_boundary(
    point: str, engine_world_url: str, start_worker, tmp_path: Path
) -> None:
    agent = client(engine_world_url)
    turn = agent.session().prompt("Please charge order A.")
    accepted = await turn.accepted
    sid = accepted.session_id
    reader = asyncio.create_task(read_with_reconnect(agent, sid, drop_after=4))

    first = start_worker(env={"FXWORLD_TEST_CRASH_AT": point})
    assert await first.wait() == -signal.SIGKILL, first.text()
    second = start_worker(lease=SURVIVOR_LEASE)
    final = await asyncio.wait_for(turn, 60)
    seen = await asyncio.wait_for(reader, 30)
    # (after-message#3 the turn had ended before the crash: the second worker finds
    # nothing to do and finishes the wake without taking the session over)
    ended = point == "after-message#3"
    await asyncio.to_thread(
        second.wait_for_log, f"session {sid}: " + ("nothing to do" if ended else "taken")
    )
    second.signal(signal.SIGTERM)
    assert await second.wait() == 0, second.text()

    # The turn ended correctly, once.
    assert final == crash_agent.FINAL
    stored = await agent.session(sid).read()
    kinds = [e.kind for e in stored]
    assert kinds.count("turn.finished") == 1 and "turn.failed" not in kinds
    assert_no_gap_no_dup(sid, seen, stored)
    assert seen[-1].kind == "turn.finished"
    assert kinds.count("fence") == (1 if ended else 2)  # one takeover per worker that ran it

    runs = read_jsonl(tmp_path / "runs.jsonl")
    charges = [r for r in runs if r["tool"] == "charge"]
    lookups = [r for r in runs if r["tool"] == "lookup"]
    # a non-idempotent tool never runs twice (after-message#2: it never ran at all)
    assert len(charges) == (0 if point == "after-message#2" else 1)
    messages = [e for e in stored if e.kind == "message"]
    assert len(messages) == 3, "no reply is saved (or shown) twice"
    # the final reply and the turn's end: one append
    assert kinds.index("turn.finished") == stored.index(messages[-1]) + 1
    heard = read_jsonl(tmp_path / "model.jsonl")
    last_request_tools = [m for m in heard[-1]["messages"] if m["role"] == "tool"]

    if point == "in-tool:lookup":
        assert len(lookups) == 2
        assert lookups[0]["execution_id"] == lookups[1]["execution_id"]
        assert [r["attempt"] for r in lookups] == [1, 2]
        assert lookups[0]["pid"] == first.pid and lookups[1]["pid"] == second.pid
        started = [e for e in stored if e.kind == "tool.started" and e.data["name"] == "lookup"]
        assert [e.data["attempt"] for e in started] == [1, 2]
    else:
        assert len(lookups) == 1
    if point == "after-message":
        assert lookups[0]["pid"] == second.pid and lookups[0]["attempt"] == 2
        started = [e for e in stored if e.kind == "tool.started" and e.data["name"] == "lookup"]
        assert [e.data["attempt"] for e in started] == [1, 2]
        assert stored.index(started[0]) == stored.index(messages[0]) + 1  # saved with it

    if point in ("in-tool:charge", "after-message#2"):
        interrupted = [e for e in stored if e.kind == "tool.interrupted"]
        assert len(interrupted) == 1
        charge_started = [
            e for e in stored if e.kind == "tool.started" and e.data["name"] == "charge"
        ]
        assert len(charge_started) == 1
        assert interrupted[0].data["execution_id"] == charge_started[0].data["execution_id"]
        if charges:
            assert charges[0]["pid"] == first.pid
            assert charges[0]["execution_id"] == charge_started[0].data["execution_id"]
        # the model heard of the partial run, as an error result of that call
        charge_result = last_request_tools[-1]
        assert charge_result["is_error"] is True
        assert "may have partly run" in charge_result["text"]
        assert charge_started[0].data["execution_id"] in charge_result["text"]
    else:
        assert "tool.interrupted" not in kinds
        assert all(not m["is_error"] for m in last_request_tools)

    model_calls = len(heard)
    if point == "before-message":
        assert model_calls == 4  # the first request is asked again
        assert heard[0]["messages"] == heard[1]["messages"]
    elif point == "after-chunk#2":
        assert model_calls == 4  # the final text is asked for again
        discarded = [e for e in stored if e.kind == "text.discarded"]
        assert len(discarded) == 1
        cut = discarded[0].data["call"]
        cut_chunks = [e for e in stored if e.kind == "text" and e.data["call"] == cut]
        assert len(cut_chunks) == 2
        message = [e for e in stored if e.kind == "message"][-1]
        kept = [
            e.data["text"]
            for e in stored
            if e.kind == "text" and e.data["call"] == message.data["call"]
        ]
        assert "".join(kept) == crash_agent.FINAL == message.data["text"]
        # the reader saw the cut text, then its discard mark, then the new text
        seen_kinds = [e.kind for e in seen]
        assert seen_kinds.index("text.discarded") > seen_kinds.index("text")
    else:
        assert model_calls == 3
    # what the model heard never contains discarded text
    assert all(
        m["text"] in ("", crash_agent.FINAL)
        for h in heard
        for m in h["messages"]
        if m["role"] == "assistant"
    )


async def test_crash_during_parallel_calls(
    engine_world_url: str, start_worker, tmp_path: Path
) -> None:
    """Both calls of one message run together; the worker dies inside ``charge``
    while ``lookup`` still runs: ``lookup`` runs again, ``charge`` is reported."""
    agent = client(engine_world_url)
    turn = agent.session().prompt("Please charge order A.")
    sid = (await turn.accepted).session_id
    script = {"ENGINE_TEST_SCRIPT": "parallel"}
    first = start_worker(
        env={**script, "FXWORLD_TEST_CRASH_AT": "in-tool:charge", "ENGINE_TEST_BLOCK": "lookup:30"}
    )
    assert await first.wait() == -signal.SIGKILL, first.text()
    second = start_worker(lease=SURVIVOR_LEASE, env=script)
    assert await asyncio.wait_for(turn, 60) == crash_agent.FINAL
    second.signal(signal.SIGTERM)
    assert await second.wait() == 0, second.text()

    runs = read_jsonl(tmp_path / "runs.jsonl")
    lookups = [r for r in runs if r["tool"] == "lookup"]
    charges = [r for r in runs if r["tool"] == "charge"]
    assert len(charges) == 1 and charges[0]["pid"] == first.pid
    assert [r["pid"] for r in lookups] == [first.pid, second.pid]
    assert lookups[0]["execution_id"] == lookups[1]["execution_id"]
    stored = await agent.session(sid).read()
    assert [e.data["name"] for e in stored if e.kind == "tool.interrupted"] == ["charge"]
    heard = read_jsonl(tmp_path / "model.jsonl")[-1]["messages"]
    results = {m["tool_call_id"]: m for m in heard if m["role"] == "tool"}
    assert results["call_0_1"]["is_error"] and "may have partly run" in results["call_0_1"]["text"]
    assert not results["call_0_0"]["is_error"]
