"""What the world cannot save is a clear, typed error where it arises, never a
stalled turn, on every world (at a 1 MiB entry limit: the default is 64 MiB,
docs/large-values.md, and what is over a limit is the same error at any): a tool's result too
large is an error the model hears and the turn goes on; a prompt over the limit
is refused before anything is written; a reply or answer too large fails the
turn naming it; an answer the log refuses is an answer to retry; a step's result
the log refuses is ``InvalidArgument`` for the tool, and the record that its
effect ran is kept."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import pydantic
import pytest

import fxworld
from fxworld import Agent, ToolContext, TurnFailed, TurnStopped, tool
from fxworld.errors import EntryTooLarge, InvalidArgument
from fxworld.protocol import World
from fxworld.testing import ScriptedModel, read_recording

pytestmark = pytest.mark.timeout(120)

MiB = 1024 * 1024
LIVE = 60.0
"""Seconds a turn may take on a loaded machine before the test fails as stuck."""


class Report(pydantic.BaseModel):
    body: str


@pytest.fixture
async def world(engine_world_url: str) -> AsyncIterator[World]:
    """A fresh world of the engine worlds, at an entry limit of 1 MiB."""
    sep = "&" if "?" in engine_world_url else "?"
    w = fxworld.open_world(f"{engine_world_url}{sep}max_entry_bytes={MiB}")
    try:
        yield w
    finally:
        await w.close()


def limit_of(world: World) -> int:
    limit = getattr(world, "max_entry_bytes", None)
    assert isinstance(limit, int), limit
    return limit


async def answered(agent: Agent[Any], turn: Awaitable[Any], *, lease: float = 5.0) -> Any:
    """Run a worker of ``agent`` until ``turn`` ends; its answer (or its error)."""
    worker = asyncio.create_task(agent.work(lease=lease, poll_interval=0.02, concurrency=1))
    try:
        return await asyncio.wait_for(asyncio.ensure_future(turn), LIVE)
    finally:
        agent.stop()
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await worker


async def kinds_and_data(world: World, sid: str) -> list[tuple[str, dict[str, Any]]]:
    out: list[Any] = []
    while batch := await world.read(sid, len(out)):
        out += batch
    return [(e.kind, e.data) for e in out]


async def test_a_tool_result_too_large_is_an_error_the_model_hears_and_the_turn_goes_on(
    world: World, tmp_path: Path
) -> None:
    runs: list[int] = []

    @tool(idempotent=True)
    def fetch(ctx: ToolContext) -> str:
        """Fetch the page."""
        runs.append(ctx.attempt)
        return "x" * (3 * MiB)

    heard = tmp_path / "model.jsonl"
    model = ScriptedModel([{"tool": "fetch", "input": {}}, "done"], record_to=heard)
    agent = Agent(model, tools=[fetch], world=world)
    turn = agent.session().prompt("Read the page.")
    sid = (await turn.accepted).session_id
    assert await answered(agent, turn) == "done"  # the turn went on, at once

    assert runs == [1]  # the tool ran once: not again and again
    limit = limit_of(world)
    finished = [d for k, d in await kinds_and_data(world, sid) if k == "tool.finished"]
    assert len(finished) == 1 and finished[0]["is_error"] is True
    error = finished[0]["output"]
    assert "'fetch'" in error and "too large" in error and f"limit of {limit} bytes" in error
    size = int(error.split("save: ")[1].split(" bytes")[0])
    assert size > 3 * MiB  # its size, as the world counted it
    second = read_recording(heard)[1]["messages"][-1]  # what the model heard next
    assert second["role"] == "tool" and second["is_error"] is True and second["text"] == error


async def test_a_prompt_over_the_limit_is_refused_before_anything_is_written(
    world: World,
) -> None:
    agent = Agent(ScriptedModel(["never"]), world=world)
    limit = limit_of(world)
    session = agent.session()
    turn = session.prompt("p" * limit)
    with pytest.raises(EntryTooLarge) as refused:
        await turn.accepted
    assert refused.value.limit == limit and refused.value.size > limit
    with pytest.raises(EntryTooLarge):
        await turn
    with pytest.raises(EntryTooLarge):
        await session.create("p" * limit)
    assert await kinds_and_data(world, session.id) == []  # nothing written, no wake
    assert await world.read(session.id, 0) == []


async def test_a_reply_too_large_ends_the_turn_naming_it(world: World) -> None:
    @tool
    def echo(s: str) -> str:
        """Echo."""
        return s

    limit = limit_of(world)
    too_long = "r" * (limit + 1000)
    call = {"tool": "echo", "input": {"s": too_long}}
    typed = json.dumps({"body": too_long})
    cases = [("answer", too_long, None), ("reply", call, None), ("answer", typed, Report)]
    for what, reply, output_type in cases:  # its text; a call's input; a typed answer
        agent = Agent(ScriptedModel([reply]), tools=[echo], world=world, output_type=output_type)
        turn = agent.session().prompt("Say it all.")
        sid = (await turn.accepted).session_id
        with pytest.raises(TurnFailed) as failed:
            await answered(agent, turn)
        error = failed.value.error
        assert error.startswith(f"the model's {what} was not saved: it is too large"), error
        assert f"limit of {limit} bytes" in error
        stored = await kinds_and_data(world, sid)
        assert stored[-1] == ("turn.failed", stored[-1][1])
        assert not any(k in ("message", "tool.started") for k, _ in stored)  # nothing of it
        saved_text = any(k == "text" for k, _ in stored)
        assert saved_text == any(k == "text.discarded" for k, _ in stored)  # left out


async def test_parallel_calls_keep_their_results_beside_one_too_large(world: World) -> None:
    limit = limit_of(world)

    @tool
    async def small(n: int) -> str:
        """A small result."""
        return f"ok {n}"

    @tool
    async def big() -> str:
        """A result over the limit."""
        return "x" * (limit + 1)

    calls = [
        {"tool": "small", "input": {"n": 1}},
        {"tool": "big", "input": {}},
        {"tool": "small", "input": {"n": 2}},
    ]
    agent = Agent(ScriptedModel([calls, "done"]), tools=[small, big], world=world)
    turn = agent.session().prompt("All three.")
    sid = (await turn.accepted).session_id
    assert await answered(agent, turn) == "done"
    results = sorted(
        (d["name"], d["is_error"], d["output"])
        for k, d in await kinds_and_data(world, sid)
        if k == "tool.finished"
    )
    assert [r[:2] for r in results] == [("big", True), ("small", False), ("small", False)]
    assert f"limit of {limit} bytes" in results[0][2]
    assert [r[2] for r in results[1:]] == ["ok 1", "ok 2"]


async def test_a_typed_answer_of_over_half_the_limit_works_as_an_untyped_one(
    world: World,
) -> None:
    body = "b" * int(limit_of(world) * 0.6)
    answer = json.dumps({"body": body})
    untyped = Agent(ScriptedModel([answer]), world=world)
    assert await answered(untyped, untyped.session().prompt("Report.")) == answer
    typed = Agent(ScriptedModel([answer]), world=world, output_type=Report)
    turn = typed.session().prompt("Report.")
    sid = (await turn.accepted).session_id
    assert await answered(typed, turn) == Report(body=body)
    stored = await kinds_and_data(world, sid)
    message = next(d for k, d in stored if k == "message")
    finished = next(d for k, d in stored if k == "turn.finished")
    assert message["text"] == answer and finished["output"] == {"body": body}


class Measure(pydantic.BaseModel):
    value: float


class Checked(pydantic.BaseModel):
    name: str

    @pydantic.field_validator("name")
    @classmethod
    def lookup(cls, name: str) -> str:
        return {"known": "known"}[name]  # a KeyError for any other name


async def test_an_answer_the_log_refuses_is_an_answer_to_retry(
    world: World, tmp_path: Path
) -> None:
    heard = tmp_path / "model.jsonl"
    model = ScriptedModel(['{"value": NaN}', '{"value": 1.5}'], record_to=heard)
    agent = Agent(model, world=world, output_type=Measure)
    turn = agent.session().prompt("Measure.")
    sid = (await turn.accepted).session_id
    assert await answered(agent, turn) == Measure(value=1.5)
    stored = await kinds_and_data(world, sid)
    invalid = [d["error"] for k, d in stored if k == "output.invalid"]
    assert len(invalid) == 1 and "cannot be saved" in invalid[0]
    retry = read_recording(heard)[1]["messages"][-1]
    assert retry["role"] == "user" and "cannot be saved" in retry["text"]


async def test_a_validator_that_raises_fails_the_answer_not_the_model_call(
    world: World,
) -> None:
    agent = Agent(
        ScriptedModel(['{"name": "x"}', '{"name": "known"}']), world=world, output_type=Checked
    )
    assert await answered(agent, agent.session().prompt("Name it.")) == Checked(name="known")
    retries = Agent(
        ScriptedModel(['{"name": "x"}'] * 3), world=world, output_type=Checked, output_retries=1
    )
    with pytest.raises(TurnFailed) as failed:
        await answered(retries, retries.session().prompt("Name it."))
    error = failed.value.error
    assert error.startswith("the answer did not match Checked after 2 tries"), error
    assert "raised KeyError" in error and "model call failed" not in error


RESULTS: dict[str, Any] = {
    "tuple": (1, 2),
    "int key": {1: "one"},
    "too large": "s" * (2 * MiB),
}


@pytest.mark.parametrize("refused", sorted(RESULTS))
async def test_a_step_result_the_log_refuses_is_invalid_argument_and_its_effect_is_kept(
    world: World, refused: str
) -> None:
    effects: list[str] = []
    heard: list[str] = []

    def charge() -> Any:
        effects.append("charge")
        return RESULTS[refused]

    @tool(resumable=True)
    async def pay(ctx: ToolContext) -> str:
        """Charge."""
        try:
            await ctx.step("charge", charge)
        except InvalidArgument as e:  # the documented error, not InvalidEntry
            heard.append(str(e))
        if ctx.attempt == 1:  # the worker dies here (its run cancelled), the step saved
            agent.stop()
            raise asyncio.CancelledError("a crash")
        return "paid"

    agent = Agent(ScriptedModel([{"tool": "pay", "input": {}}, "done"]), tools=[pay], world=world)
    turn = agent.session().prompt("Pay.")
    sid = (await turn.accepted).session_id
    await asyncio.wait_for(agent.work(lease=0.3, poll_interval=0.02, concurrency=1), LIVE)
    assert effects == ["charge"] and len(heard) == 1  # the first worker died in the tool
    assert await answered(agent, turn) == "done"  # a second worker resumed the call

    assert effects == ["charge"]  # the effect ran once, and was not run again
    assert len(heard) == 2 and heard[0] == heard[1]  # the resume hears the saved error
    assert heard[0].startswith("step 'charge' ran, and its result")
    if refused == "too large":
        assert f"limit of {limit_of(world)} bytes" in heard[0]
    steps = [(k, d) for k, d in await kinds_and_data(world, sid) if k.startswith("step.")]
    assert [k for k, _ in steps] == ["step.started", "step.finished"]
    assert steps[1][1]["error"] == heard[0] and "result" not in steps[1][1]


async def test_a_step_name_the_log_refuses_is_refused_before_the_effect(world: World) -> None:
    effects: list[str] = []
    heard: list[str] = []

    @tool
    async def pay(ctx: ToolContext) -> str:
        """Charge."""
        try:
            await ctx.step("charge \ud800", lambda: effects.append("charge"))
        except InvalidArgument as e:
            heard.append(str(e))
        return "not charged"

    agent = Agent(ScriptedModel([{"tool": "pay", "input": {}}, "done"]), tools=[pay], world=world)
    turn = agent.session().prompt("Pay.")
    sid = (await turn.accepted).session_id
    assert await answered(agent, turn) == "done"
    assert effects == [] and len(heard) == 1 and "cannot be saved" in heard[0]
    assert not any(k.startswith("step.") for k, _ in await kinds_and_data(world, sid))


async def test_a_childs_answer_too_large_for_its_parents_log_reaches_the_parent_as_an_error(
    world: World,
) -> None:
    limit = limit_of(world)
    body = "é" * (limit // 4)  # its answer fits the child's log; as JSON text, not the parent's
    answer = json.dumps({"body": body}, ensure_ascii=False)
    researcher = Agent(ScriptedModel([answer]), output_type=Report)
    desk = Agent(
        ScriptedModel([{"tool": "research", "input": {"input": "Find it."}}, "Done."]),
        tools=[researcher.as_tool(name="research")],
        world=world,
    )
    turn = desk.session().prompt("Find it.")
    sid = (await turn.accepted).session_id
    assert await answered(desk, turn) == "Done."
    reported = [d for k, d in await kinds_and_data(world, sid) if k == "child.finished"]
    assert len(reported) == 1 and reported[0]["is_error"] is True
    output = reported[0]["output"]
    assert output.startswith("the agent's answer was not passed on: it is too large to save")
    assert f"limit of {limit} bytes" in output


async def test_a_turn_stopped_with_more_text_than_one_entry_takes_ends_stopped(
    world: World,
) -> None:
    limit = limit_of(world)
    long = "t" * (3 * limit)
    agent = Agent(ScriptedModel([long], pieces=300, delay=0.01), world=world)
    session = agent.session()
    turn = session.prompt("Talk.")
    await turn.accepted
    worker = asyncio.create_task(agent.work(lease=5.0, poll_interval=0.02, concurrency=1))
    try:
        saved, seen = 0, 0
        while saved <= limit + 1000:  # more text saved than one entry takes
            batch = await world.read(session.id, seen)
            seen += len(batch)
            saved += sum(len(e.data["text"]) for e in batch if e.kind == "text")
            await asyncio.sleep(0.01)
        await session.stop("enough")
        with pytest.raises(TurnStopped) as stopped:
            await asyncio.wait_for(asyncio.ensure_future(turn.result()), LIVE)
    finally:
        agent.stop()
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await worker
    assert stopped.value.reason == "enough"
    kinds = [k for k, _ in await kinds_and_data(world, session.id)]
    assert kinds[-1] == "turn.stopped" and "turn.failed" not in kinds
