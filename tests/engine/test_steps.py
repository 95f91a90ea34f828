"""Durable steps inside a tool (``ctx.step``): a resumable tool killed between two
effects finishes after the crash with each effect done once, on every world."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import crash_agent
import pytest
from conftest import SURVIVOR_LEASE, client, read_jsonl

from fxworld import Agent, MemoryWorld, ToolContext, tool
from fxworld.testing import ScriptedModel

pytestmark = pytest.mark.timeout(120)

STEPS = {"ENGINE_TEST_SCRIPT": "steps"}


async def crash_then_resume(
    engine_world_url: str, start_worker: Any, point: str, script: dict[str, str] = STEPS
) -> Any:
    agent = client(engine_world_url)
    turn = agent.session().prompt("Pay order A.")
    sid = (await turn.accepted).session_id
    first = start_worker(env={**script, "FXWORLD_TEST_CRASH_AT": point})
    assert await first.wait() == -signal.SIGKILL, first.text()
    second = start_worker(lease=SURVIVOR_LEASE, env=script)
    final = await asyncio.wait_for(turn, 60)
    second.signal(signal.SIGTERM)
    assert await second.wait() == 0, second.text()
    return final, await agent.session(sid).read()


async def test_charge_then_email_sigkill_between_steps_charges_once_emails_once(
    engine_world_url: str, start_worker: Any, tmp_path: Path
) -> None:
    final, stored = await crash_then_resume(engine_world_url, start_worker, "in-tool:pay")
    assert final == crash_agent.PAY_FINAL
    effects = read_jsonl(tmp_path / "effects.jsonl")
    assert [e["effect"] for e in effects] == ["charge", "email"]
    runs = [r for r in read_jsonl(tmp_path / "runs.jsonl") if r["tool"] == "pay"]
    assert [r["attempt"] for r in runs] == [1, 2]  # the resumable call ran again
    xid = runs[0]["execution_id"]
    assert effects[0]["key"] == f"{xid}:charge" and effects[1]["key"] == f"{xid}:email"
    assert effects[0]["pid"] != effects[1]["pid"]  # the email came from the second worker
    steps = [(e.kind, e.data["step"]) for e in stored if e.kind.startswith("step.")]
    assert steps == [
        ("step.started", "charge"),
        ("step.finished", "charge"),
        ("step.started", "email"),
        ("step.finished", "email"),
    ]
    result = next(e for e in stored if e.kind == "tool.finished")
    assert result.data["output"] == f"charged {xid}:charge, emailed {xid}:email"


async def test_a_step_killed_mid_run_is_not_run_again_and_the_tool_hears_it(
    engine_world_url: str, start_worker: Any, tmp_path: Path
) -> None:
    final, stored = await crash_then_resume(engine_world_url, start_worker, "in-step:charge")
    assert final == crash_agent.PAY_FINAL
    assert [e["effect"] for e in read_jsonl(tmp_path / "effects.jsonl")] == ["charge"]
    result = next(e for e in stored if e.kind == "tool.finished")
    assert result.data["output"] == "the charge of order A may have partly run; no receipt sent"
    assert not any(e.kind == "step.finished" for e in stored)


FINISHED_REFUND = (
    "Its step 'refund' finished: its effect happened, once, and calling the tool again "
    "would repeat it."
)


async def test_a_step_cut_by_a_crash_is_heard_with_the_steps_that_finished_before_it(
    engine_world_url: str, start_worker: Any, tmp_path: Path
) -> None:
    script = {"ENGINE_TEST_SCRIPT": "settle"}  # resumable; StepInterrupted not caught
    final, stored = await crash_then_resume(
        engine_world_url, start_worker, "in-step:notify", script
    )
    assert final == crash_agent.SETTLE_FINAL
    assert [e["effect"] for e in read_jsonl(tmp_path / "effects.jsonl")] == ["refund", "notify"]
    result = next(e for e in stored if e.kind == "tool.finished")
    xid = result.data["execution_id"]
    expected = (
        f"StepInterrupted: step 'notify' (key {xid}:notify) was started before a crash and "
        "did not finish; it may have partly run, and is not run again (mark it "
        f"idempotent=True to re-run). {FINISHED_REFUND}"
    )
    assert result.data["is_error"] is True and result.data["output"] == expected
    heard = read_jsonl(tmp_path / "model.jsonl")[-1]["messages"][-1]
    assert heard["role"] == "tool" and heard["text"] == expected


async def test_an_interrupted_call_is_heard_with_its_finished_and_its_cut_steps(
    engine_world_url: str, start_worker: Any, tmp_path: Path
) -> None:
    script = {"ENGINE_TEST_SCRIPT": "settle_once"}  # neither resumable nor idempotent
    final, stored = await crash_then_resume(
        engine_world_url, start_worker, "in-step:notify", script
    )
    assert final == crash_agent.SETTLE_FINAL
    assert [e["effect"] for e in read_jsonl(tmp_path / "effects.jsonl")] == ["refund", "notify"]
    [cut] = [e for e in stored if e.kind == "tool.interrupted"]
    xid = cut.data["execution_id"]
    expected = (
        f"The call to tool 'settle_once' (execution_id {xid}) was started, but the process "
        "running it stopped before it finished. It may have partly run, or not at all. "
        f"{FINISHED_REFUND} Its step 'notify' was started and did not finish: it may have "
        "partly run. It was NOT run again: check its effect before retrying it, or ask the user."
    )
    assert cut.data["message"] == expected
    heard = read_jsonl(tmp_path / "model.jsonl")[-1]["messages"][-1]
    assert heard["role"] == "tool" and heard["text"] == expected


def steps_agent(fn: Any) -> Agent:
    return Agent(
        ScriptedModel([{"tool": "multi", "input": {}}, "done"]),
        tools=[tool(name="multi")(fn)],
        world=MemoryWorld(),
    )


async def tool_output(fn: Any) -> str:
    agent = steps_agent(fn)
    turn = agent.session().prompt("go")
    sid = (await turn.accepted).session_id
    await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)
    stored = await agent.world.read(sid, 0, limit=1000)
    return str(next(e for e in stored if e.kind == "tool.finished").data["output"])


async def test_a_step_name_used_twice_in_one_call_is_refused() -> None:
    async def multi(ctx: ToolContext) -> Any:
        await ctx.step("a", lambda: 1)
        return await ctx.step("a", lambda: 2)

    assert "InvalidArgument: step name 'a' is used twice" in await tool_output(multi)


async def test_a_step_result_that_is_not_json_is_refused() -> None:
    async def multi(ctx: ToolContext) -> Any:
        return await ctx.step("a", lambda: {1, 2})

    output = await tool_output(multi)
    assert "InvalidArgument: step 'a' ran, and its result (set) was not saved" in output
    assert "is not JSON" in output


async def test_a_step_returns_its_result_and_async_fns_are_awaited() -> None:
    async def double(x: int) -> int:
        return 2 * x

    async def multi(ctx: ToolContext) -> Any:
        return [await ctx.step("a", double, 3), await ctx.step("b", lambda y: y + 1, y=1)]

    assert await tool_output(multi) == "[6, 2]"


async def test_ctx_step_outside_a_worker_is_a_clear_error() -> None:
    ctx = ToolContext("x", "s", "c", "t")
    with pytest.raises(Exception, match="only inside a tool call of a worker"):
        await ctx.step("a", lambda: 1)
    assert ctx.step_key("a") == "x:a"


async def test_a_step_not_awaited_fails_the_call_naming_it() -> None:
    """Issue 43 item 6: ``ctx.step(...)`` without ``await`` dropped the effect and
    the tool reported success (only a RuntimeWarning said otherwise)."""
    refunds: list[str] = []

    async def multi(ctx: ToolContext) -> Any:
        ctx.step("refund", refunds.append, "A-1")  # no await: nothing runs
        return "refunded"

    agent = steps_agent(multi)
    turn = agent.session().prompt("go")
    sid = (await turn.accepted).session_id
    await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)
    stored = await agent.world.read(sid, 0)
    (result,) = [e for e in stored if e.kind == "tool.finished"]
    assert result.data["is_error"] is True
    assert result.data["output"] == (
        "InvalidArgument: ctx.step('refund') in tool 'multi' was not awaited before the tool "
        "returned: the step did not run and nothing was saved; write `await ctx.step(...)`"
    )
    assert refunds == [] and not any(e.kind.startswith("step.") for e in stored)


@pytest.mark.parametrize("caught", [False, True])
async def test_ctx_step_from_a_sync_tool_fails_the_call_at_once(caught: bool) -> None:
    """A sync tool runs in a thread: nothing there can await the step. The call
    fails, naming the step, even when the tool swallows the error."""
    refunds: list[str] = []

    def multi(ctx: ToolContext) -> str:
        try:
            ctx.step("refund", refunds.append, "A-1")
        except Exception:
            if not caught:
                raise
        return "refunded"

    output = await tool_output(multi)
    assert output.startswith(
        "InvalidArgument: ctx.step('refund') was called from the sync tool 'multi', which runs "
        "in a thread where nothing can await it: the step did not run"
    )
    assert refunds == []


async def test_a_tools_steps_are_visible_in_the_inspector() -> None:
    import httpx

    from fxworld.web import create_inspector

    async def multi(ctx: ToolContext) -> Any:
        return await ctx.step("charge", lambda: "ch_1")

    agent = steps_agent(multi)
    turn = agent.session().prompt("go")
    sid = (await turn.accepted).session_id
    await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)
    app = create_inspector(agent.world, allow_anyone=True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://inspect") as http:
        page = await http.get(f"/sessions/{sid}")
    await app.state.close()
    assert page.status_code == 200
    # the step sits in its tool's card: its name, its state and its result
    assert '<b class="step-name">charge</b> <span class="step-state">finished</span>' in page.text
    assert "ch_1" in page.text


async def test_steps_of_parallel_calls_are_all_saved() -> None:
    @tool(resumable=True)
    async def multi(n: int, ctx: ToolContext) -> Any:
        return [await ctx.step(f"s{i}", asyncio.sleep, 0, n * 10 + i) for i in range(3)]

    calls = [{"tool": "multi", "input": {"n": n}} for n in range(3)]
    agent = Agent(ScriptedModel([calls, "done"]), tools=[multi], world=MemoryWorld())
    turn = agent.session().prompt("go")
    sid = (await turn.accepted).session_id
    await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)
    assert await turn == "done"
    stored = await agent.world.read(sid, 0, limit=1000)
    results = sorted(e.data["result"] for e in stored if e.kind == "step.finished")
    assert results == [0, 1, 2, 10, 11, 12, 20, 21, 22]
    outputs = sorted(e.data["output"] for e in stored if e.kind == "tool.finished")
    assert outputs == ["[0, 1, 2]", "[10, 11, 12]", "[20, 21, 22]"]
