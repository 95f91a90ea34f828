"""Tools as docs/tools.md describes them: the input schema from hints and the
docstring's ``Args:``, ``@tool(timeout=...)``, a sync tool off the event loop with
its lease renewed, and what a tool's exception becomes."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Annotated, Any

import pydantic
import pytest

from fxworld import Agent, MemoryWorld, ToolContext, tool
from fxworld.engine import ToolTimedOut, log
from fxworld.errors import InvalidArgument
from fxworld.testing import ScriptedModel, read_recording
from fxworld.types import Entry, WakeLease
from tests.support.waiting import wait_until, wait_until_async

pytestmark = pytest.mark.timeout(60)


# -- the input schema ---------------------------------------------------------------------


def test_the_args_section_describes_each_parameter_and_leaves_the_description() -> None:
    @tool
    def refund(
        order_id: str,
        cents: Annotated[int, pydantic.Field(ge=0)] = 0,
        reason: Annotated[str, pydantic.Field(description="from the hint")] = "",
        *,
        ctx: ToolContext,
    ) -> str:
        """Refund an order.

        Only paid orders can be refunded.

        Args:
            order_id: The order's id,
                as the shop prints it.
            cents (int): How much, in cents.

                Zero refunds all of it.
            reason: from the docstring
            ctx: what the call knows of itself (not input)

        Returns:
            The refund's id.
        """
        return ""

    assert refund.description == (
        "Refund an order.\n\nOnly paid orders can be refunded.\n\nReturns:\n    The refund's id."
    )
    props = refund.input_schema["properties"]
    assert set(props) == {"order_id", "cents", "reason"}
    assert props["order_id"]["description"] == "The order's id, as the shop prints it."
    assert props["cents"]["description"] == "How much, in cents.\n\nZero refunds all of it."
    assert props["cents"]["minimum"] == 0  # a pydantic.Field in the hint holds
    assert props["reason"]["description"] == "from the hint"  # the hint's own wins
    assert refund.input_schema["required"] == ["order_id"]


def test_arguments_is_an_args_section_too_and_an_explicit_description_wins() -> None:
    @tool(description="Look an order up.")
    def lookup(order_id: str, verbose: bool = False) -> str:
        """Look up.

        Arguments:
            order_id: which order
        """
        return ""

    assert lookup.description == "Look an order up."
    props = lookup.input_schema["properties"]
    assert props["order_id"]["description"] == "which order"
    assert "description" not in props["verbose"]


@pytest.mark.parametrize(
    ("doc", "error"),
    [
        ("Refund.\n\nArgs:\n    order: the id\n", "describes 'order' in its Args section"),
        ("Refund.\n\nArgs:\n    order_id -- the id\n", "cannot read 'order_id -- the id'"),
    ],
    ids=["names-no-parameter", "unreadable-entry"],
)
def test_an_args_section_that_cannot_be_right_is_refused_at_decoration(
    doc: str, error: str
) -> None:
    def refund(order_id: str) -> str:
        return ""

    refund.__doc__ = doc
    with pytest.raises(InvalidArgument, match=error):
        tool(refund)


# -- timeouts -----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1.5, "5", True, float("nan"), float("inf")])
def test_a_timeout_that_is_not_seconds_above_zero_is_refused_at_decoration(bad: Any) -> None:
    with pytest.raises(InvalidArgument, match=r"timeout must be seconds > 0 or None"):

        @tool(timeout=bad)
        def slow() -> str:
            return ""


def _agent(world: MemoryWorld, *tools: Any, record: Path | None = None, **kw: Any) -> Agent:
    replies: list[Any] = [{"tool": tools[0].name, "input": {}}, "noted"]
    return Agent(ScriptedModel(replies, record_to=record), tools=list(tools), world=world, **kw)


async def _finished(world: MemoryWorld, sid: str) -> list[Entry]:
    return [e for e in await world.read(sid, 0) if e.kind == log.TOOL_FINISHED]


async def test_an_async_tool_past_its_timeout_is_cancelled_and_the_model_hears_it(
    tmp_path: Path,
) -> None:
    runs: list[int] = []
    cancelled = asyncio.Event()

    @tool(idempotent=True, timeout=0.05)
    async def hang(ctx: ToolContext) -> str:
        runs.append(ctx.attempt)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    world = MemoryWorld()
    agent = _agent(world, hang, record=tmp_path / "heard.jsonl")
    turn = agent.session().prompt("go")
    await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)
    assert await turn == "noted"
    assert cancelled.is_set() and runs == [1]  # timed out: finished, not run again
    expected = (
        "ToolTimedOut: tool 'hang' did not finish within its timeout of 0.05 s and was "
        "cancelled: it no longer runs, but it may have partly run"
    )
    [done] = await _finished(world, (await turn.accepted).session_id)
    assert done.data["is_error"] is True and done.data["output"] == expected
    assert "running" not in done.data  # cancelled: nothing of it runs on
    heard = read_recording(tmp_path / "heard.jsonl")[1]["messages"][-1]
    assert heard["role"] == "tool" and heard["is_error"] is True and heard["text"] == expected


async def _late(world: MemoryWorld, sid: str) -> Entry:
    """The session's ``tool.late`` entry, once it landed."""
    late: list[Entry] = []

    async def landed() -> bool:
        late[:] = [e for e in await world.read(sid, 0) if e.kind == log.TOOL_LATE]
        return bool(late)

    await wait_until_async(landed, 30)
    [entry] = late
    return entry


RUNS_ON = (
    "NOT stopped: a sync function runs in a thread, which cannot be stopped, so it may still "
    "complete and its effects may still happen. Check whether they did before calling"
)


async def test_a_sync_tool_past_its_timeout_is_said_to_run_on_and_its_late_result_is_saved(
    tmp_path: Path,
) -> None:
    release = threading.Event()
    effects = tmp_path / "effects.txt"

    @tool(timeout=0.05)
    def refund(order_id: str) -> str:
        release.wait(30)  # past its timeout: its thread is not stopped
        with open(effects, "a") as f:
            f.write(f"refunded {order_id}\n")
        return f"refunded {order_id}"

    world = MemoryWorld()
    replies: list[Any] = [{"tool": "refund", "input": {"order_id": "A"}}, "noted"]
    agent = Agent(ScriptedModel(replies, record_to=tmp_path / "heard.jsonl"), tools=[refund],
                  world=world)  # fmt: skip
    turn = agent.session().prompt("go")
    await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)
    assert await turn == "noted"  # the turn went on while the thread still blocks
    sid = (await turn.accepted).session_id
    [done] = await _finished(world, sid)
    expected = (
        "ToolTimedOut: tool 'refund' did not finish within its timeout of 0.05 s, and it was "
        f"{RUNS_ON} it again"
    )
    assert done.data["output"] == expected and done.data["is_error"] is True
    assert done.data["running"] == ["tool:refund"]
    heard = read_recording(tmp_path / "heard.jsonl")[1]["messages"][-1]
    assert heard["text"] == expected and heard["is_error"] is True
    assert not effects.exists()

    release.set()  # the thread ends: its refund happens, and its result is saved
    late = await _late(world, sid)
    assert effects.read_text() == "refunded A\n"
    assert late.data["execution_id"] == done.data["execution_id"]
    assert late.data["call_id"] == done.data["call_id"] and late.data["name"] == "refund"
    assert late.data["part"] == "tool:refund" and "step" not in late.data
    assert late.data["output"] == "refunded A" and late.data["is_error"] is False
    assert (await world.read(sid, 0))[-1].kind == log.TOOL_LATE  # after the turn's end
    page = await _inspect(world, sid)
    assert "still running in its thread: tool:refund" in page
    late_part = page.split("ended in its thread after its call was cut", 1)  # in the card
    assert len(late_part) == 2 and "refunded A" in late_part[1].split("</div>", 1)[0]


async def _inspect(world: MemoryWorld, sid: str) -> str:
    """The inspector's page of session ``sid``."""
    import httpx

    from fxworld.web import create_inspector

    app = create_inspector(world, allow_anyone=True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://inspect") as http:
        page = await http.get(f"/sessions/{sid}")
    await app.state.close()
    assert page.status_code == 200
    return page.text


async def test_a_sync_step_past_its_async_tools_timeout_is_said_to_run_on_and_is_recorded(
    tmp_path: Path,
) -> None:
    release = threading.Event()

    def slow_refund(order_id: str) -> str:
        release.wait(30)
        raise ConnectionError(f"the bank refused {order_id}")

    @tool(timeout=0.2)
    async def settle(order_id: str, ctx: ToolContext) -> str:
        await ctx.step("reserve", lambda: "r-1")
        return str(await ctx.step("refund", slow_refund, order_id))

    world = MemoryWorld()
    replies: list[Any] = [{"tool": "settle", "input": {"order_id": "A"}}, "noted"]
    agent = Agent(ScriptedModel(replies, record_to=tmp_path / "heard.jsonl"), tools=[settle],
                  world=world)  # fmt: skip
    turn = agent.session().prompt("go")
    await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)
    assert await turn == "noted"
    sid = (await turn.accepted).session_id
    [done] = await _finished(world, sid)
    expected = (
        "ToolTimedOut: tool 'settle' did not finish within its timeout of 0.2 s and was "
        f"cancelled, but its step 'refund' was {RUNS_ON} the tool again"
    )
    assert done.data["output"] == expected and done.data["running"] == ["step:refund"]
    assert read_recording(tmp_path / "heard.jsonl")[1]["messages"][-1]["text"] == expected

    release.set()
    late = await _late(world, sid)
    assert late.data["part"] == "step:refund" and late.data["step"] == "refund"
    assert late.data["output"] == "ConnectionError: the bank refused A"
    assert late.data["is_error"] is True
    steps = [(e.kind, e.data["step"]) for e in await world.read(sid, 0) if "step" in e.data]
    assert steps == [  # the call is closed: the late outcome is tool.late, not step.finished
        ("step.started", "reserve"),
        ("step.finished", "reserve"),
        ("step.started", "refund"),
        ("tool.late", "refund"),
    ]


async def test_a_tools_own_timeout_error_is_not_taken_for_its_timeout() -> None:
    @tool(timeout=30)
    async def fetch() -> str:
        raise TimeoutError("the shop did not answer")

    world = MemoryWorld()
    agent = _agent(world, fetch)
    turn = agent.session().prompt("go")
    await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)
    [done] = await _finished(world, (await turn.accepted).session_id)
    assert done.data["output"] == "TimeoutError: the shop did not answer"


@pytest.mark.parametrize("idempotent", [True, False])
async def test_a_call_left_started_by_a_dead_worker_follows_the_crash_rules_with_a_timeout(
    idempotent: bool,
) -> None:
    attempts: list[int] = []

    @tool(idempotent=idempotent, timeout=0.05)
    async def hang(ctx: ToolContext) -> str:
        attempts.append(ctx.attempt)
        await asyncio.Event().wait()
        return "never"

    world = MemoryWorld()
    agent = _agent(world, hang)
    turn = agent.session().prompt("go")
    sid = (await turn.accepted).session_id
    call = {"id": "call_0_0", "name": "hang", "input": {}, "execution_id": "e1"}
    fence = await world.acquire(sid)  # a worker started the call, then died
    await world.append(
        sid,
        [
            log.entry(log.TURN_STARTED, prompt=1, turn="t"),
            log.entry(log.MESSAGE, call="m", model="scripted", text="", tool_calls=[call],
                      usage=None, stop_reason="tool_use"),
            log.entry(log.TOOL_STARTED, execution_id="e1", call_id="call_0_0", name="hang",
                      input={}, attempt=1),
        ],
        fence=fence,
    )  # fmt: skip
    await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)
    assert await turn == "noted"
    kinds = [e.kind for e in await world.read(sid, 0)]
    if idempotent:  # run again (attempt 2), and timed out again: a finished error
        assert attempts == [2] and kinds.count(log.TOOL_FINISHED) == 1
        assert "ToolTimedOut" in (await _finished(world, sid))[0].data["output"]
    else:  # never run again on its own
        assert attempts == [] and log.TOOL_INTERRUPTED in kinds
        assert log.TOOL_FINISHED not in kinds


# -- a sync tool runs off the event loop; the lease is renewed ---------------------------


class RenewalsCounted(MemoryWorld):
    """A MemoryWorld that counts the lease renewals it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.renewals = 0

    async def renew_wake(self, wake: WakeLease, *, lease: float) -> WakeLease:
        self.renewals += 1
        return await super().renew_wake(wake, lease=lease)


async def test_a_sync_tool_runs_in_a_thread_while_the_lease_is_renewed() -> None:
    release = threading.Event()
    runs: list[str] = []

    @tool
    def block(ctx: ToolContext) -> str:
        runs.append(ctx.execution_id)
        if not release.wait(30):  # set by the test's coroutine: the loop runs meanwhile
            raise RuntimeError("the event loop was blocked")
        return "done"

    world = RenewalsCounted()
    first, second = _agent(world, block), _agent(world, block)
    turn = first.session().prompt("go")
    lease = 0.2
    workers = [
        asyncio.create_task(a.work(lease=lease, poll_interval=0.02)) for a in (first, second)
    ]
    try:
        await wait_until(lambda: bool(runs), 30)
        await wait_until(lambda: world.renewals >= 9, 30)  # three leases' worth
        release.set()
        assert await asyncio.wait_for(turn, 30) == "noted"
    finally:
        release.set()
        for a in (first, second):
            a.stop()
        await asyncio.gather(*workers)
    sid = (await turn.accepted).session_id
    assert len(runs) == 1 and [e.data["output"] for e in await _finished(world, sid)] == ["done"]
    assert [e.kind for e in await world.read(sid, 0)].count(log.FENCE) == 1  # nobody took over


# -- a tool's exception -----------------------------------------------------------------


async def test_a_tools_exception_is_a_scrubbed_error_the_model_hears(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    @tool
    def charge(order_id: str) -> str:
        raise ConnectionError(f"postgresql://shop:Hunter2Secret@db/shop refused {order_id}")

    world = MemoryWorld()
    agent = Agent(
        ScriptedModel([{"tool": "charge", "input": {"order_id": "A-1"}}, "Sorry."],
                      record_to=tmp_path / "heard.jsonl"),
        tools=[charge], world=world,
    )  # fmt: skip
    turn = agent.session().prompt("charge it")
    with caplog.at_level(logging.INFO, logger="fxworld.worker"):
        await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)
    assert await turn == "Sorry."
    expected = "ConnectionError: postgresql://shop:***@db/shop refused A-1"
    [done] = await _finished(world, (await turn.accepted).session_id)
    assert done.data == {**done.data, "output": expected, "is_error": True}
    heard = read_recording(tmp_path / "heard.jsonl")[1]["messages"][-1]
    assert heard["text"] == expected and heard["is_error"] is True
    # the worker's own log keeps the exception whole, with its traceback
    [record] = [r for r in caplog.records if "tool charge raised" in r.getMessage()]
    assert record.levelno == logging.INFO and record.exc_info is not None
    assert isinstance(record.exc_info[1], ConnectionError)


async def test_a_tool_input_that_does_not_validate_is_heard_in_one_line_without_a_url(
    tmp_path: Path,
) -> None:
    @tool
    def refund(order_id: str, cents: Annotated[int, pydantic.Field(ge=0)]) -> str:
        return "refunded"

    world = MemoryWorld()
    agent = Agent(
        ScriptedModel([{"tool": "refund", "input": {"cents": -5}}, "Sorry."],
                      record_to=tmp_path / "heard.jsonl"),
        tools=[refund], world=world,
    )  # fmt: skip
    turn = agent.session().prompt("refund it")
    await asyncio.wait_for(agent.work(until_idle=True, lease=5.0), 30)
    assert await turn == "Sorry."
    heard = read_recording(tmp_path / "heard.jsonl")[1]["messages"][-1]
    assert heard["is_error"] is True
    assert heard["text"] == (
        "InvalidArgument: invalid input for tool 'refund': order_id: Field required; "
        "cents: Input should be greater than or equal to 0"
    )


def test_tool_timed_out_is_a_timeout_error() -> None:
    error = ToolTimedOut("slow", 1.5)
    assert isinstance(error, TimeoutError) and (error.name, error.seconds) == ("slow", 1.5)
