"""docs/contract.md section 4 (the turn engine), called as a stranger reading it would.

Only public names: ``fxworld`` (Agent, tool, world, open_world), ``fxworld.testing``
(ScriptedModel), ``fxworld.models``, ``fxworld.errors``, and the ``fxworld worker``
command. The crash test SIGKILLs a real worker process.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fxworld import Agent, open_world, tool, world
from fxworld.testing import ScriptedModel, moved_clock

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_process_world(monkeypatch: pytest.MonkeyPatch) -> None:
    # hygiene: these tests set the process's world; put it back afterwards
    monkeypatch.setattr("fxworld.selection._current", None)


@contextlib.asynccontextmanager
async def working(agent: Agent, **kw: Any) -> AsyncIterator[None]:
    task = asyncio.create_task(agent.work(**kw))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_prompt_accepted_stream_and_turn(tmp_path: Path) -> None:
    ran: list[tuple[str, str]] = []

    @tool(idempotent=True)
    def get_order(order_id: str, ctx: Any) -> dict[str, str]:
        ran.append(("get_order", ctx.execution_id))
        return {"id": order_id, "status": "paid"}

    @tool
    async def refund_order(order_id: str) -> str:
        ran.append(("refund_order", order_id))
        return f"refunded {order_id}"

    rec = tmp_path / "heard.jsonl"
    world("memory://")
    agent = Agent(
        model=ScriptedModel(
            [
                {"tool": "get_order", "input": {"order_id": "A-1"}},
                [
                    {"tool": "refund_order", "input": {"order_id": "A-1"}},
                    {"tool": "get_order", "input": {"order_id": "A-2"}},
                ],
                "Refunded A-1.",
            ],
            record_to=rec,
        ),
        tools=[get_order, refund_order],
        instructions="Be brief.",
    )
    turn = agent.session().prompt("Refund order A-1.")
    accepted = await turn.accepted
    assert accepted.session_id and isinstance(accepted.cursor, str)
    async with working(agent, lease=15.0):
        assert await asyncio.wait_for(turn, 30) == "Refunded A-1."
    assert [name for name, _ in ran].count("get_order") == 2
    assert ("refund_order", "A-1") in ran
    ids = [x for name, x in ran if name == "get_order"]
    assert len(set(ids)) == 2  # every call has its own execution_id

    # stream(None) from the start, in any order of handles
    events = await agent.session(accepted.session_id).read(None)
    kinds = [e.kind for e in events]
    assert kinds[0] == "prompt" and kinds[-1] == "turn.finished"
    for i, k in enumerate(kinds):
        if k == "tool.started":  # written before the tool ran; finished comes later
            eid = events[i].data["execution_id"]
            assert any(
                e.kind == "tool.finished" and e.data["execution_id"] == eid for e in events[i + 1 :]
            )
    # resuming from any cursor: no gap, no duplicate
    middle = events[4].cursor
    rest = []
    async for ev in agent.session(accepted.session_id).stream(middle):
        rest.append(ev)
        if ev.kind == "turn.finished":
            break
    assert [e.cursor for e in rest] == [e.cursor for e in events[5:]]

    heard = [json.loads(line) for line in rec.read_text().splitlines()]
    assert [h["n"] for h in heard] == [0, 1, 2]
    assert heard[0]["instructions"] == "Be brief."
    assert "Refund order A-1." in json.dumps(heard[0]["messages"])
    assert "refunded A-1" in json.dumps(heard[2]["messages"])


async def test_stream_from_accepted_cursor_sees_the_turn(tmp_path: Path) -> None:
    w = open_world(f"sqlite:///{tmp_path}/w.db")
    agent = Agent(model=ScriptedModel(["one", "two"]), world=w)
    session = agent.session("my-session.1")
    t1 = session.prompt("first")
    t2 = session.prompt("second")
    a1 = await t1.accepted
    a2 = await t2.accepted
    assert a1.session_id == a2.session_id == "my-session.1"
    async with working(agent):
        assert await asyncio.wait_for(t1, 30) == "one"
        assert await asyncio.wait_for(t2, 30) == "two"
    seen = []
    async for ev in agent.session("my-session.1").stream(a1.cursor):
        seen.append(ev)
        if [e.kind for e in seen].count("turn.finished") == 2:
            break
    # the cursor stands at the first prompt itself: the stream begins right after it
    prompts = [e.data["text"] for e in seen if e.kind == "prompt"]
    assert prompts == ["second"]
    assert [e.data["text"] for e in seen if e.kind == "turn.finished"] == ["one", "two"]
    await w.close()


async def test_malformed_cursor_is_a_clear_error() -> None:
    from fxworld.errors import WorldError

    agent = Agent(model=ScriptedModel(["x"]), world=open_world("memory://"))
    with pytest.raises((ValueError, WorldError)):
        async for _ in agent.session("s1").stream("not-a-cursor"):
            break


async def test_scripted_model_reply_shapes(tmp_path: Path) -> None:
    """Reply n answers a conversation with n assistant messages: a str is the final
    text, streamed in pieces; a dict is one tool call; a list, parallel calls; past
    the last reply, a ModelError. A reply of no known shape is refused when made."""
    from fxworld.errors import ModelError
    from fxworld.models import Message, ModelRequest, ModelResponse, TextDelta

    record = tmp_path / "heard.jsonl"
    model = ScriptedModel(
        [
            "the answer",
            {"tool": "t", "input": {}},
            [{"tool": "a", "input": {"x": 1}}, {"tool": "b"}],
        ],
        record_to=record,
        pieces=3,
    )
    assert not record.exists()  # nothing recorded before a request

    async def reply(n: int) -> list[Any]:
        said = [Message("user", "hi"), *[Message("assistant", "...")] * n]
        return [event async for event in model.stream(ModelRequest("be brief", said))]

    *pieces, final = await reply(0)
    assert all(isinstance(p, TextDelta) for p in pieces) and len(pieces) == 3
    assert "".join(p.text for p in pieces) == "the answer"
    assert isinstance(final, ModelResponse)
    assert (final.text, final.tool_calls, final.stop_reason) == ("the answer", (), "end_turn")

    (one,) = await reply(1)
    assert [(c.name, c.input) for c in one.tool_calls] == [("t", {})]
    assert one.stop_reason == "tool_use"
    (parallel,) = await reply(2)
    assert [(c.name, c.input) for c in parallel.tool_calls] == [("a", {"x": 1}), ("b", {})]
    assert len({c.id for c in (*one.tool_calls, *parallel.tool_calls)}) == 3

    with pytest.raises(ModelError, match="3 replies; asked for reply 4"):
        await reply(3)
    heard = [json.loads(line) for line in record.read_text().splitlines()]
    assert [h["n"] for h in heard] == [0, 1, 2, 3]

    for bad in (42, [], {"input": {}}, [{"tool": "t"}, "text"]):
        with pytest.raises(TypeError, match="a scripted"):
            ScriptedModel([bad])  # type: ignore[list-item]


AGENT_MODULE = """
import os, time
from pathlib import Path
from fxworld import Agent, tool
from fxworld.testing import ScriptedModel

DIR = Path(os.environ["CONTRACT_DIR"])

def _log(name, ctx):
    with open(DIR / "runs.jsonl", "a") as f:
        f.write(f'{{"tool": "{name}", "execution_id": "{ctx.execution_id}"}}\\n')
    if not (DIR / "resume").exists():
        time.sleep(600)  # the first worker is killed in here

@tool(idempotent=True)
def lookup(order_id: str, ctx) -> str:
    _log("lookup", ctx)
    return "found " + order_id

@tool
def charge(order_id: str, ctx) -> str:
    _log("charge", ctx)
    return "charged " + order_id

agent = Agent(
    model=ScriptedModel(
        [[{"tool": "lookup", "input": {"order_id": "A"}},
          {"tool": "charge", "input": {"order_id": "A"}}],
         "all done"],
        record_to=DIR / "heard.jsonl",
    ),
    tools=[lookup, charge],
)
"""


async def test_worker_sigkilled_inside_tools_turn_continues(tmp_path: Path) -> None:
    (tmp_path / "contract_crash_agent.py").write_text(textwrap.dedent(AGENT_MODULE))
    url = f"sqlite:///{tmp_path}/w.db"
    env = {
        **os.environ,
        "CONTRACT_DIR": str(tmp_path),
        "FXWORLD_URL": url,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}",
    }
    world(url)
    os.environ["CONTRACT_DIR"] = str(tmp_path)
    sys.path.insert(0, str(tmp_path))
    try:
        mod = importlib.import_module("contract_crash_agent")
    finally:
        sys.path.remove(str(tmp_path))
        del os.environ["CONTRACT_DIR"]
    agent: Agent = mod.agent
    turn = agent.session().prompt("charge A")
    await turn.accepted
    child = subprocess.Popen(  # noqa: ASYNC220 - started once, not awaited
        [sys.executable, "-m", "fxworld.cli", "worker", "contract_crash_agent:agent",
         "--lease", "1"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    runs = tmp_path / "runs.jsonl"
    try:
        deadline = time.monotonic() + 60
        while not (runs.exists() and len(runs.read_text().splitlines()) >= 2):
            assert child.poll() is None, child.stderr.read() if child.stderr else ""
            assert time.monotonic() < deadline, "the worker never ran both tools"
            await asyncio.sleep(0.05)
        child.send_signal(signal.SIGKILL)
    finally:
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        child.wait(30)
    (tmp_path / "resume").touch()
    first = [json.loads(line) for line in runs.read_text().splitlines()]
    async with working(agent, lease=10.0):  # the successor: it never loses its lease
        assert await asyncio.wait_for(turn, 60) == "all done"
    after = [json.loads(line) for line in runs.read_text().splitlines()]
    new = after[len(first) :]
    by_tool = {r["tool"]: r["execution_id"] for r in first}
    # the idempotent call ran again with the same execution_id; the other never did
    assert new == [{"tool": "lookup", "execution_id": by_tool["lookup"]}]
    # the model heard that charge may have partly run
    heard = [json.loads(line) for line in (tmp_path / "heard.jsonl").read_text().splitlines()]
    last = heard[-1]["messages"]
    tool_msgs = [m for m in last if m["role"] == "tool"]
    assert len(tool_msgs) == 2
    charge_msg = next(m for m in tool_msgs if "found" not in m["text"])
    assert charge_msg["is_error"] is True
    assert "charged" not in charge_msg["text"]


async def test_worker_renews_its_lease_during_a_long_tool(tmp_path: Path) -> None:
    # lease 2 s, a tool that takes 3 s, a second worker polling the same world every
    # 0.1 s: the running worker renews its lease, so nobody takes the session over
    # (without a renewal the second would take it about 2 s in, while the tool runs).
    runs: list[str] = []
    started = asyncio.Event()

    @tool(idempotent=True)
    async def slow(ctx: Any) -> str:
        runs.append(ctx.execution_id)
        started.set()
        await asyncio.sleep(3.0)
        return "slow done"

    url = f"sqlite:///{tmp_path}/w.db"
    model = ScriptedModel([{"tool": "slow", "input": {}}, "finished"])
    first = Agent(model=model, tools=[slow], world=open_world(url))
    second = Agent(model=model, tools=[slow], world=open_world(url))
    turn = first.session("long").prompt("go")
    await turn.accepted
    async with working(first, lease=2.0):
        await asyncio.wait_for(started.wait(), 30)
        async with working(second, lease=2.0, poll_interval=0.1):
            assert await asyncio.wait_for(turn, 30) == "finished"
    assert len(runs) == 1
    events = await first.session("long").read()
    assert [e.kind for e in events].count("fence") == 1
    # streamed text chunks add up to exactly the saved message's text
    chunks = "".join(e.data["text"] for e in events if e.kind == "text")
    assert chunks == "finished"


async def test_prompt_is_unfenced_with_a_wake_and_never_doubled() -> None:
    w = open_world("memory://")
    agent = Agent(model=ScriptedModel(["hi"]), world=w)
    first = agent.session("p1").prompt("hello", key="retry-1")
    again = agent.session("p1").prompt("hello", key="retry-1")  # a client's retry
    a1, a2 = await first.accepted, await again.accepted
    assert a1 == a2
    log = await w.read("p1")
    assert [(e.kind, e.epoch) for e in log] == [("prompt", None)]
    lease = await w.take_wake(lease=5)
    assert lease is not None and lease.session_id == "p1"


async def test_prompts_sent_while_a_turn_runs_wait_their_turn_in_order() -> None:
    gate = asyncio.Event()
    started = asyncio.Event()

    @tool
    async def wait_gate() -> str:
        started.set()
        await gate.wait()
        return "opened"

    w = open_world("memory://")
    agent = Agent(
        model=ScriptedModel([{"tool": "wait_gate", "input": {}}, "first", "second", "third"]),
        tools=[wait_gate],
        world=w,
    )
    s = agent.session("queue")
    t1 = s.prompt("one")
    async with working(agent):
        await asyncio.wait_for(started.wait(), 30)
        t2 = s.prompt("two")
        await t2.accepted
        t3 = s.prompt("three")
        await t3.accepted
        gate.set()
        results = [await asyncio.wait_for(t, 30) for t in (t1, t2, t3)]
    assert results == ["first", "second", "third"]
    log = await w.read("queue")
    prompt_seq = {e.data["text"]: e.seq for e in log if e.kind == "prompt"}
    order = [e.data["prompt"] for e in log if e.kind in ("turn.started", "turn.finished")]
    one, two, three = prompt_seq["one"], prompt_seq["two"], prompt_seq["three"]
    assert order == [one, one, two, two, three, three]


async def test_deadline_yields_at_a_step_boundary_and_next_invocation_continues() -> None:
    runs: list[int] = []

    @tool(idempotent=True)
    async def step(n: int) -> str:
        runs.append(n)
        clock.advance(0.4)  # the step takes 0.4 s of the engine's clock
        return f"step {n}"

    w = open_world("memory://")
    replies: list[Any] = [{"tool": "step", "input": {"n": i}} for i in range(4)]
    agent = Agent(model=ScriptedModel([*replies, "done"]), tools=[step], world=w)
    turn = agent.session("dl").prompt("go")
    await turn.accepted
    with moved_clock() as clock:
        await asyncio.wait_for(agent.work(deadline=1.0), 30)  # a serverless time limit
        kinds = [e.kind for e in await w.read("dl")]
        assert "turn.yielded" in kinds and "turn.finished" not in kinds
        assert kinds[-1] == "turn.yielded"  # stopped at a step boundary, nothing half-done
        assert kinds.count("tool.started") == kinds.count("tool.finished")
        await asyncio.wait_for(agent.work(deadline=30, until_idle=True), 60)  # next invocation
    assert await asyncio.wait_for(turn, 5) == "done"
    assert sorted(runs) == [0, 1, 2, 3]  # every step ran once
