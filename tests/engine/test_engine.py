"""The engine in one process, on MemoryWorld (and SQLite where time matters)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fxworld import Agent, MemoryWorld, ToolContext, TurnFailed, tool
from fxworld.engine import conversation, decode_cursor, encode_cursor
from fxworld.errors import ConfigurationError, InvalidCursor, InvalidSessionId
from fxworld.models.base import (
    Message,
    ModelError,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCall,
)
from fxworld.testing import ScriptedModel, moved_clock, read_recording
from fxworld.types import Entry, NewEntry

pytestmark = pytest.mark.timeout(60)


@tool(idempotent=True)
def lookup(id: str) -> dict[str, str]:
    """Look up an order."""
    return {"id": id, "status": "paid"}


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


def make(replies: list[Any], tmp_path: Path | None = None, **kw: Any) -> Agent:
    record = tmp_path / "model.jsonl" if tmp_path else None
    return Agent(
        ScriptedModel(replies, record_to=record),
        tools=[lookup, explode],
        instructions="Be brief.",
        world=MemoryWorld(),
        **kw,
    )


async def run_until_idle(agent: Agent) -> None:
    await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)


async def all_entries(agent: Agent, sid: str) -> list[Entry]:
    return await agent.world.read(sid, 0, limit=10_000)


# -- cursors ------------------------------------------------------------------------


def test_cursor_round_trip_and_refusals() -> None:
    c = encode_cursor("s1", 1234)
    assert decode_cursor("s1", c) == 1234
    assert decode_cursor("s1", None) == 0 == decode_cursor("s1", "")
    for bad in ["1234", "zz.00000000", "-1.abc", c + "x", "1.2.3", "é.12345678", "x" * 60]:
        with pytest.raises(InvalidCursor):
            decode_cursor("s1", bad)
    with pytest.raises(InvalidCursor, match="not issued for session"):
        decode_cursor("s2", c)


async def test_stream_refuses_a_malformed_cursor() -> None:
    agent = make(["hi"])
    with pytest.raises(InvalidCursor):
        async for _ in agent.session("s1").stream("garbage"):
            pass
    with pytest.raises(InvalidCursor):
        await agent.session("s1").read(encode_cursor("other", 3))


def test_session_ids_are_checked() -> None:
    agent = make(["hi"])
    with pytest.raises(InvalidSessionId):
        agent.session("no spaces/allowed")
    assert agent.session().id.startswith("s-")


# -- prompts and turns --------------------------------------------------------------


async def test_a_turn_end_to_end_with_tools(tmp_path: Path) -> None:
    agent = make([{"tool": "lookup", "input": {"id": "A"}}, "Order A is paid."], tmp_path=tmp_path)
    turn = agent.session().prompt("Is order A paid?")
    accepted = await turn.accepted
    worker = asyncio.create_task(run_until_idle(agent))
    assert await asyncio.wait_for(turn, 30) == "Order A is paid."
    await worker

    log = await all_entries(agent, accepted.session_id)
    kinds = [e.kind for e in log]
    assert kinds[0] == "prompt" and decode_cursor(accepted.session_id, accepted.cursor) == 1
    assert kinds[1:] == [
        "fence",
        "turn.started",
        "message",
        "tool.started",
        "tool.finished",
        *(["text"] * kinds.count("text")),
        "message",
        "turn.finished",
    ]
    assert all(e.data.get("v") == 1 for e in log if e.kind != "fence")
    first, last = [e for e in log if e.kind == "message"]
    call = first.data["tool_calls"][0]
    assert call["name"] == "lookup" and call["execution_id"]
    assert first.data["stop_reason"] == "tool_use" and first.data["model"] == "scripted"
    assert last.data["usage"]["output_tokens"] == len("Order A is paid.")
    started = next(e for e in log if e.kind == "tool.started")
    assert started.data["execution_id"] == call["execution_id"]
    chunks = "".join(e.data["text"] for e in log if e.kind == "text")
    assert chunks == "Order A is paid."

    heard = read_recording(tmp_path / "model.jsonl")
    assert [h["n"] for h in heard] == [0, 1]
    assert heard[1]["messages"][-1] == {
        "role": "tool",
        "text": json.dumps({"id": "A", "status": "paid"}),
        "tool_calls": [],
        "tool_call_id": "call_0_0",
        "is_error": False,
    }
    assert heard[0]["instructions"] == "Be brief." and heard[0]["tools"] == ["lookup", "explode"]


async def test_a_prompt_key_never_doubles_the_prompt() -> None:
    agent = make(["one answer"])
    s = agent.session()
    a1 = await s.prompt("hello", key="k1").accepted
    a2 = await s.prompt("hello", key="k1").accepted  # a client retrying after a timeout
    assert a1 == a2
    await run_until_idle(agent)
    kinds = [e.kind for e in await all_entries(agent, s.id)]
    assert kinds.count("prompt") == 1 and kinds.count("turn.finished") == 1


async def test_prompts_wait_their_turn_in_order(tmp_path: Path) -> None:
    agent = make(["first answer", "second answer", "third answer"], tmp_path=tmp_path)
    s = agent.session()
    turns = [s.prompt(t) for t in ("one", "two", "three")]
    for t in turns:
        await t.accepted
    await run_until_idle(agent)
    assert [await t for t in turns] == ["first answer", "second answer", "third answer"]
    heard = read_recording(tmp_path / "model.jsonl")
    # each turn hears the earlier turns, never a later prompt
    assert [[m["text"] for m in h["messages"] if m["role"] == "user"] for h in heard] == [
        ["one"],
        ["one", "two"],
        ["one", "two", "three"],
    ]


async def test_a_prompt_during_a_turn_is_answered_after_it() -> None:
    gate = asyncio.Event()

    @tool
    async def wait_for_gate() -> str:
        await gate.wait()
        return "opened"

    agent = Agent(
        ScriptedModel([{"tool": "wait_for_gate"}, "done one", "done two"]),
        tools=[wait_for_gate],
        world=MemoryWorld(),
    )
    s = agent.session()
    first = s.prompt("one")
    worker = asyncio.create_task(agent.work(until_idle=True))
    events = s.stream()
    async for ev in events:
        if ev.kind == "tool.started":
            break
    second = s.prompt("two")  # lands in the middle of the first turn
    await second.accepted
    gate.set()
    assert await asyncio.wait_for(first, 30) == "done one"
    assert await asyncio.wait_for(second, 30) == "done two"
    await worker
    kinds = [e.kind for e in await all_entries(agent, s.id)]
    assert kinds.index("prompt", 1) < kinds.index("turn.finished")  # it came in mid-turn
    assert kinds.count("turn.started") == 2


async def test_until_turn_with_a_prompt_cursor_waits_for_that_prompts_turn() -> None:
    agent = make(["answer one", "answer two"])
    s = agent.session()
    await s.prompt("one").accepted
    second = await s.prompt("two").accepted
    await run_until_idle(agent)
    events = [e async for e in s.stream(second.cursor, until="turn")]
    ends = [e for e in events if e.kind == "turn.finished"]
    assert [e.data["text"] for e in ends] == ["answer one", "answer two"]
    assert events[-1] is ends[-1]
    # from any other cursor: the first turn to end
    events = [e async for e in s.stream(None, until="turn")]
    assert events[-1].kind == "turn.finished" and events[-1].data["text"] == "answer one"


async def test_a_tool_that_raises_is_shown_to_the_model(tmp_path: Path) -> None:
    agent = make(
        [{"tool": "explode", "input": {"reason": "bad disk"}}, "It failed."], tmp_path=tmp_path
    )
    turn = agent.session().prompt("try it")
    await run_until_idle(agent)
    assert await turn == "It failed."
    tool_msg = read_recording(tmp_path / "model.jsonl")[1]["messages"][-1]
    assert tool_msg["is_error"] is True and "RuntimeError: boom: bad disk" in tool_msg["text"]


async def test_bad_tool_input_and_unknown_tools_are_errors_for_the_model(tmp_path: Path) -> None:
    agent = make(
        [[{"tool": "lookup", "input": {"wrong": 1}}, {"tool": "nope", "input": {}}], "ok"],
        tmp_path=tmp_path,
    )
    turn = agent.session().prompt("go")
    await run_until_idle(agent)
    assert await turn == "ok"
    results = [
        m for m in read_recording(tmp_path / "model.jsonl")[1]["messages"] if m["role"] == "tool"
    ]
    by_call = {m["tool_call_id"]: m for m in results}  # results come in the order they end
    assert sorted(by_call) == ["call_0_0", "call_0_1"]
    assert all(m["is_error"] for m in results)
    assert by_call["call_0_0"]["text"] == (
        "InvalidArgument: invalid input for tool 'lookup': id: Field required"
    )
    assert "unknown tool 'nope'" in by_call["call_0_1"]["text"]


class Flaky:
    """Fails ``failures`` times (retryable or not), then says ``text``."""

    name = "flaky"

    def __init__(self, failures: int, retryable: bool, text: str = "finally") -> None:
        self.failures, self.retryable, self.text, self.calls = failures, retryable, text, 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.calls += 1
        yield TextDelta("partial ")
        if self.calls <= self.failures:
            raise ModelError("overloaded", retryable=self.retryable, status=529)
        yield TextDelta(self.text)
        yield ModelResponse(text="partial " + self.text, stop_reason="end_turn")


async def test_a_retryable_model_error_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asyncio, "sleep", _fast_sleep)
    model = Flaky(failures=2, retryable=True)
    agent = Agent(model, world=MemoryWorld(), text_chunk_interval=0.0)
    turn = agent.session().prompt("hi")
    await run_until_idle(agent)
    assert await turn == "partial finally" and model.calls == 3
    log = await all_entries(agent, turn.session_id)
    discarded = [e.data["call"] for e in log if e.kind == "text.discarded"]
    assert len(discarded) == 2
    kept = [e.data["text"] for e in log if e.kind == "text" and e.data["call"] not in discarded]
    assert "".join(kept) == "partial finally"
    msgs = conversation(log)
    assert [m.text for m in msgs] == ["hi", "partial finally"]


async def test_a_non_retryable_model_error_fails_the_turn() -> None:
    agent = Agent(Flaky(failures=1, retryable=False), world=MemoryWorld())
    s = agent.session()
    turn = s.prompt("hi")
    again = s.prompt("and now?")
    await run_until_idle(agent)
    with pytest.raises(TurnFailed, match="overloaded"):
        await turn
    assert await again == "partial finally"  # the session goes on with the next prompt
    ends = [e for e in await all_entries(agent, s.id) if e.kind.startswith("turn.f")]
    assert [(e.kind, e.data.get("error")) for e in ends] == [
        ("turn.failed", "overloaded"),
        ("turn.finished", None),
    ]


async def test_retries_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asyncio, "sleep", _fast_sleep)
    model = Flaky(failures=100, retryable=True)
    agent = Agent(model, world=MemoryWorld(), model_retries=2)
    turn = agent.session().prompt("hi")
    await run_until_idle(agent)
    with pytest.raises(TurnFailed):
        await turn
    assert model.calls == 3


_real_sleep = asyncio.sleep


async def _fast_sleep(seconds: float, result: Any = None) -> Any:
    return await _real_sleep(min(seconds, 0.01), result)


# -- time limits --------------------------------------------------------------------


async def test_a_deadline_yields_and_the_next_invocation_continues(tmp_path: Path) -> None:
    """Two 0.8 s tool calls never fit in one 1.5 s invocation: the turn yields at a
    step boundary, and each invocation takes the session once (a yielded turn is
    not taken back, fenced and yielded again while the budget lasts). Each call
    takes its 0.8 s on the engine's clock, moved forward, not in real time."""
    runs: list[str] = []

    @tool(idempotent=True)
    async def slow(ctx: ToolContext) -> str:
        runs.append(ctx.execution_id)
        clock.advance(0.8)
        return "slow done"

    agent = Agent(
        ScriptedModel([{"tool": "slow"}, {"tool": "slow"}, "finished"]),
        tools=[slow],
        world=f"sqlite:///{tmp_path}/w.db",
    )
    turn = agent.session().prompt("go")
    await turn.accepted
    invocations = 0
    with moved_clock() as clock:
        while not any(e.kind == "turn.finished" for e in await all_entries(agent, turn.session_id)):
            invocations += 1
            assert invocations < 10
            await asyncio.wait_for(agent.work(deadline=1.5, until_idle=True), 30)
    assert await turn == "finished"
    assert invocations >= 2 and len(runs) == 2 == len(set(runs))
    log = await all_entries(agent, turn.session_id)
    yielded = [e for e in log if e.kind == "turn.yielded"]
    assert yielded and all(e.data["reason"] == "deadline" for e in yielded)
    assert len(yielded) == invocations - 1
    assert [e.kind for e in log].count("fence") == invocations


async def test_a_deadline_times_each_step_on_the_engine_clock() -> None:
    """Steps are timed on the clock the deadline reads: with that clock moved an
    hour ahead, a quick turn still fits in one invocation (timing a step from the
    real clock made the first model call look an hour long)."""

    @tool(idempotent=True)
    async def quick() -> str:
        return "quick done"

    agent = Agent(ScriptedModel([{"tool": "quick"}, "done"]), tools=[quick], world=MemoryWorld())
    turn = agent.session().prompt("go")
    await turn.accepted
    with moved_clock() as clock:
        clock.advance(3600)
        result = await asyncio.wait_for(agent.work(deadline=5.0, until_idle=True), 30)
    assert not result.hit_deadline
    assert await asyncio.wait_for(turn, 5) == "done"


# -- the model hears ------------------------------------------------------------------


def _e(seq: int, kind: str, **data: Any) -> Entry:
    from datetime import UTC, datetime

    return Entry("s", seq, kind, {"v": 1, **data}, 1, datetime.now(UTC))


def test_conversation_leaves_out_cut_text_and_reports_interrupted_calls() -> None:
    call = {"id": "c1", "name": "charge", "input": {}, "execution_id": "x1"}
    log = [
        _e(1, "prompt", text="charge A"),
        _e(2, "turn.started", prompt=1, turn="t"),
        _e(3, "text", call="m1", text="I will cha"),  # cut by a crash
        _e(4, "text.discarded", call="m1", reason="cut"),
        _e(5, "text", call="m2", text="Charging."),
        _e(6, "message", call="m2", text="Charging.", tool_calls=[call]),
        _e(7, "tool.started", execution_id="x1", call_id="c1", name="charge", attempt=1),
        _e(
            8,
            "tool.interrupted",
            execution_id="x1",
            call_id="c1",
            name="charge",
            message="may have partly run",
        ),
        _e(9, "prompt", text="queued, not yet answered"),
    ]
    assert conversation(log) == [
        Message("user", "charge A"),
        Message("assistant", "Charging.", tool_calls=(ToolCall("c1", "charge", {}),)),
        Message("tool", "may have partly run", tool_call_id="c1", is_error=True),
    ]


def test_the_conversation_a_model_call_gets_is_a_snapshot() -> None:
    from fxworld.engine.replay import Replay

    state = Replay().apply_all(
        [_e(1, "prompt", text="hi"), _e(2, "turn.started", prompt=1, turn="t")]
    )
    snapshot = state.conversation()
    state.apply(_e(3, "message", call="m", text="hello", tool_calls=[]))
    assert len(snapshot) == 1 and list(snapshot) == [Message("user", "hi")]
    assert snapshot[-1] == snapshot[0] == Message("user", "hi") and snapshot[:5] == [snapshot[0]]
    with pytest.raises(IndexError):
        snapshot[1]
    assert len(state.conversation()) == 2


async def test_a_log_with_a_final_reply_saved_apart_from_its_turn_end_is_finished() -> None:
    """Logs written before the final reply and turn.finished were one append: the
    turn is ended with the saved reply; the model is not asked again."""
    agent = make(["never asked"])
    world = agent.world
    await world.append("s", [NewEntry("prompt", {"v": 1, "text": "hi", "key": "k"})], wake=0)
    fence = await world.acquire("s")
    reply = {"v": 1, "call": "m", "text": "Hello.", "tool_calls": [], "model": "x"}
    await world.append(
        "s",
        [NewEntry("turn.started", {"v": 1, "prompt": 1, "turn": "t"}), NewEntry("message", reply)],
        fence=fence,
    )
    await run_until_idle(agent)
    log = await all_entries(agent, "s")
    kinds = [e.kind for e in log]
    assert kinds == ["prompt", "fence", "turn.started", "message", "fence", "turn.finished"]
    assert log[-1].data["text"] == "Hello." and log[-1].data["prompt"] == 1


def test_a_newer_log_version_is_refused() -> None:
    from fxworld.engine.replay import Replay
    from fxworld.errors import WorldError

    with pytest.raises(WorldError, match="upgrade fxworld"):
        Replay().apply(Entry("s", 1, "prompt", {"v": 99, "text": "x"}, None, _e(1, "x").at))


# -- tools and models -------------------------------------------------------------------


def test_tool_schema_comes_from_the_signature() -> None:
    @tool(idempotent=True)
    def refund(order_id: str, cents: int = 0, *, ctx: ToolContext) -> str:
        """Refund an order."""
        return ""

    assert (
        refund.name == "refund" and refund.idempotent and refund.description == "Refund an order."
    )
    schema = refund.input_schema
    assert set(schema["properties"]) == {"order_id", "cents"}  # ctx is not input
    assert schema["required"] == ["order_id"]
    given = tool(name="x", input_schema={"type": "object"})(lambda: 1)
    assert given.input_schema == {"type": "object"} and not given.idempotent


def test_agent_resolves_a_model_string_at_build_time() -> None:
    with pytest.raises(ConfigurationError):
        Agent("no-such-provider/model")
    with pytest.raises(ConfigurationError, match="two tools"):
        Agent(ScriptedModel(["x"]), tools=[lookup, lookup])


async def test_scripted_model_is_deterministic_and_streams_in_pieces(tmp_path: Path) -> None:
    model = ScriptedModel(
        ["hello there world", {"tool": "t", "input": {"a": 1}}], record_to=tmp_path / "r.jsonl"
    )

    async def ask(messages: list[Message]) -> list[ModelEvent]:
        return [ev async for ev in model.stream(ModelRequest("", messages))]

    first = await ask([Message("user", "hi")])
    assert len([e for e in first if isinstance(e, TextDelta)]) == 4
    assert "".join(e.text for e in first if isinstance(e, TextDelta)) == "hello there world"
    again = await ask([Message("user", "something else")])
    assert first[:-1] == again[:-1]  # the same reply: n counts assistant messages only
    second = await ask([Message("user", "hi"), Message("assistant", "x")])
    assert isinstance(second[-1], ModelResponse)
    assert second[-1].tool_calls[0].name == "t" and second[-1].tool_calls[0].input == {"a": 1}
    with pytest.raises(ModelError):
        await ask([Message("assistant", "x")] * 2)
    assert [r["n"] for r in read_recording(tmp_path / "r.jsonl")] == [0, 0, 1, 2]
    with pytest.raises(TypeError):
        ScriptedModel([42])  # type: ignore[list-item]


async def test_a_turn_that_kills_every_worker_fails_after_max_deliveries() -> None:
    from fxworld.engine import log

    agent = make(["never said"], max_deliveries=2)
    world = agent.world
    turn = agent.session().prompt("poison")
    sid = (await turn.accepted).session_id
    fence = await world.acquire(sid)  # a worker started the turn, then died...
    await world.append(sid, [log.entry(log.TURN_STARTED, prompt=1, turn="t")], fence=fence)
    for _ in range(2):  # ...and so did the next one: two deliveries whose leases ran out
        assert await world.take_wake(lease=0.01) is not None
        await asyncio.sleep(0.02)
    await run_until_idle(agent)  # the third delivery gives up on the turn
    with pytest.raises(TurnFailed, match="delivered 3 times"):
        await turn
    with pytest.raises(RuntimeError, match="running event loop"):
        await asyncio.to_thread(agent.session().prompt, "from a thread without a loop")


class FlakyWorld(MemoryWorld):
    """A MemoryWorld whose storage 'fails' now and then: some appends raise
    BackendUnavailable before writing, some after writing (the outcome unknown to
    the caller), and some reads fail."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    async def append(self, session_id: str, entries: Any, **kw: Any) -> int:
        from fxworld.errors import BackendUnavailable

        self.calls += 1
        if kw.get("fence") is not None and self.calls % 3 == 0:
            raise BackendUnavailable("connection reset before the write")
        seq = await super().append(session_id, entries, **kw)
        if kw.get("fence") is not None and self.calls % 4 == 0:
            raise BackendUnavailable("connection reset after the write")
        return seq

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        from fxworld.errors import BackendUnavailable

        self.calls += 1
        if self.calls % 7 == 0:
            raise BackendUnavailable("read timed out")
        return await super().read(session_id, after, limit=limit)


async def test_an_unavailable_backend_is_retried_without_doubling_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(asyncio, "sleep", _fast_sleep)
    world = FlakyWorld()
    agent = Agent(
        ScriptedModel(
            [
                {"tool": "lookup", "input": {"id": "A"}},
                {"tool": "lookup", "input": {"id": "B"}},
                "done",
            ]
        ),
        tools=[lookup],
        world=world,
    )
    turn = agent.session().prompt("go")
    await turn.accepted
    await asyncio.wait_for(agent.work(until_idle=True), 30)
    stored = await MemoryWorld.read(world, turn.session_id, 0)
    assert [e.kind for e in stored if e.kind not in ("text",)] == [
        "prompt",
        "fence",
        "turn.started",
        *["message", "tool.started", "tool.finished"] * 2,
        "message",
        "turn.finished",
    ]
    assert world.calls > 20  # the failures did happen


async def test_one_worker_runs_many_sessions_within_its_concurrency() -> None:
    running = 0
    peak = 0

    @tool
    async def busy() -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.2)
        running -= 1
        return "ok"

    agent = Agent(ScriptedModel([{"tool": "busy"}, "done"]), tools=[busy], world=MemoryWorld())
    turns = [agent.session().prompt("go") for _ in range(8)]
    for t in turns:
        await t.accepted
    await asyncio.wait_for(agent.work(until_idle=True, concurrency=3), 30)
    assert [await t for t in turns] == ["done"] * 8
    assert peak == 3


class Paused:
    """Streams ``"Hello"``, then stays silent until ``go`` is set, then the rest."""

    name = "paused"

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.calls += 1
        yield TextDelta("Hello")
        await self.go.wait()
        yield TextDelta(", world")
        yield ModelResponse(text="Hello, world", stop_reason="end_turn")


async def _wait_for_kind(agent: Agent, sid: str, kind: str) -> list[Entry]:
    for _ in range(1000):
        entries = await all_entries(agent, sid)
        if any(e.kind == kind for e in entries):
            return entries
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {kind} entry")


async def test_text_is_saved_while_the_model_is_silent() -> None:
    model = Paused()
    agent = Agent(model, world=MemoryWorld(), text_chunk_interval=0.05)
    turn = agent.session().prompt("hi")
    worker = asyncio.create_task(agent.work(until_idle=True))
    sid = (await turn.accepted).session_id
    entries = await _wait_for_kind(agent, sid, "text")  # saved before the model goes on
    assert [e.data["text"] for e in entries if e.kind == "text"] == ["Hello"]
    model.go.set()
    assert await asyncio.wait_for(turn, 10) == "Hello, world"
    await worker


async def test_stop_abandons_a_silent_model_call_and_hands_the_turn_over() -> None:
    model = Paused()
    agent = Agent(model, world=MemoryWorld(), text_chunk_interval=0.0)
    turn = agent.session().prompt("hi")
    worker = asyncio.create_task(agent.work())
    sid = (await turn.accepted).session_id
    await _wait_for_kind(agent, sid, "text")
    agent.stop()  # what SIGTERM does in `fxworld worker`
    await asyncio.wait_for(worker, 5)  # at once: not after the model or a lease
    kinds = [e.kind for e in await all_entries(agent, sid)]
    assert kinds[-2:] == ["text.discarded", "turn.yielded"]
    model.go.set()
    await asyncio.wait_for(agent.work(until_idle=True), 10)  # due at once: handed back
    assert await turn == "Hello, world" and model.calls == 2


async def test_parallel_calls_run_together_and_each_is_recorded() -> None:
    running = 0
    peak = 0

    @tool(idempotent=True)
    async def fetch(key: str, ctx: ToolContext) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.1 if key == "slow" else 0.0)
        running -= 1
        return f"{key}:{ctx.execution_id}"

    agent = Agent(
        ScriptedModel([[{"tool": "fetch", "input": {"key": k}} for k in ("slow", "a", "b")], "ok"]),
        tools=[fetch],
        world=MemoryWorld(),
    )
    turn = agent.session().prompt("go")
    await run_until_idle(agent)
    assert await turn == "ok"
    assert peak == 3
    log = await all_entries(agent, turn.session_id)
    kinds = [e.kind for e in log]
    first_finished = kinds.index("tool.finished")
    assert kinds[first_finished - 3 : first_finished] == ["tool.started"] * 3  # one batch
    finished = [e.data for e in log if e.kind == "tool.finished"]
    assert finished[-1]["output"].startswith("slow:")  # recorded as each one ended
    assert all(d["output"].endswith(d["execution_id"]) for d in finished)
    msgs = conversation(log)
    assert [m.tool_call_id for m in msgs if m.role == "tool"] == [
        "call_0_1",
        "call_0_2",
        "call_0_0",
    ]


async def test_a_tool_step_is_two_appends_and_results_that_come_together_share_one() -> None:
    """Durable writes: the reply with its calls' starts is one append, the final
    reply with the turn's end is one; results that come while another is being
    saved go together in the next append (every one saved before the model
    is called again)."""
    appends: list[list[str]] = []

    class SlowWorld(MemoryWorld):
        async def append(self, session_id: str, entries: Any, **kw: Any) -> int:
            if kw.get("fence") is not None:
                appends.append([e.kind for e in entries])
                await asyncio.sleep(0.05)  # a slow disk: results gather meanwhile
            return await super().append(session_id, entries, **kw)

    @tool(idempotent=True)
    async def fetch(key: str) -> str:
        return key

    calls = [{"tool": "fetch", "input": {"key": k}} for k in ("a", "b", "c")]
    agent = Agent(ScriptedModel([calls, "ok"]), tools=[fetch], world=SlowWorld())
    turn = agent.session().prompt("go")
    await run_until_idle(agent)
    assert await turn == "ok"
    assert appends == [
        ["turn.started"],
        ["message", "tool.started", "tool.started", "tool.started"],
        ["tool.finished"],  # the first result, at once
        ["tool.finished", "tool.finished"],  # the two that came while it was saved
        ["text", "message", "turn.finished"],
    ]
    heard = conversation(await all_entries(agent, turn.session_id))
    assert sorted(m.text for m in heard if m.role == "tool") == ["a", "b", "c"]
