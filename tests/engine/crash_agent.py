"""The agent the engine's process tests run in worker subprocesses.

Configured by environment, so every process builds the same agent:
- ``ENGINE_TEST_DIR``: where tools record each run (``runs.jsonl``) and the model
  records each request (``model.jsonl``);
- ``ENGINE_TEST_TEXT_DELAY``: seconds between streamed text pieces (default 0.05),
  until a file named ``fast`` appears in ``ENGINE_TEST_DIR`` (a test that needed
  slow text to stop a worker in does not wait for it in the next worker);
- ``ENGINE_TEST_BLOCK``: ``tool:seconds``, that tool sleeps that long after it
  recorded its run (so a test can stop the process inside it);
- ``FXWORLD_TEST_CRASH_AT``: the engine's crash points, and ``in-tool:<name>``;
- ``ENGINE_TEST_SCRIPT=parallel``: both tools called in one message; ``charge``
  then starts only once ``lookup`` has recorded its run in this process, so a
  crash inside ``charge`` always finds ``lookup`` running.
- ``ENGINE_TEST_SCRIPT=approval``: the model calls ``refund`` (needs approval, not
  idempotent), then answers; ``ENGINE_TEST_APPROVAL_TIMEOUT``: its timeout.
- A redeploy: ``ENGINE_TEST_REFUND_APPROVAL=0`` gives ``refund`` no
  ``needs_approval``; ``ENGINE_TEST_OTHER_APPROVAL=1`` adds ``close_account``, a
  tool that needs approval (the model never calls it).
- ``ENGINE_TEST_SCRIPT=long``: one long answer (stop it while it streams).
- ``ENGINE_TEST_SCRIPT=steps``: the model calls ``pay`` (``resumable``), whose durable
  steps charge then email (each effect a line of ``effects.jsonl``); crash points
  ``in-tool:pay`` (between the steps) and ``in-step:charge`` (after the charge's
  effect, before its result is saved).
- ``ENGINE_TEST_SCRIPT=settle`` (``settle_once``): the model calls ``settle``
  (``resumable``; ``settle_once``: neither resumable nor idempotent), whose durable
  steps refund then notify, each an effect; a ``StepInterrupted`` is not caught.
- ``ENGINE_TEST_SCRIPT=ghost``: the model calls ``refund_sync``, a sync tool with a
  timeout of :data:`GHOST_TIMEOUT` s that waits for a file named ``go`` in
  ``ENGINE_TEST_DIR`` (recording ``started`` first), then refunds (an effect);
  ``ghost_step``: the model calls ``refund_steps`` (async), whose sync step
  ``refund`` does the same after a quick step ``reserve``.
- ``ENGINE_TEST_OTEL=1``: OpenTelemetry's SDK as the global providers, spans and
  metrics written to files (:mod:`otel_setup`).

The script: look up order A (idempotent), charge it (not idempotent), answer.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

if os.environ.get("ENGINE_TEST_OTEL") == "1":
    import otel_setup  # noqa: F401 (sets the global providers, before any run)

from fxworld import Agent, ToolContext, tool
from fxworld.engine import StepInterrupted
from fxworld.models.base import ModelEvent, ModelRequest
from fxworld.testing import ScriptedModel, crash_point

DIR = Path(os.environ.get("ENGINE_TEST_DIR", "."))
FINAL = "Order A is charged. All done, thank you for waiting."
SCRIPT = [
    {"tool": "lookup", "input": {"id": "A"}},
    {"tool": "charge", "input": {"id": "A", "cents": 1250}},
    FINAL,
]
PARALLEL = [  # ENGINE_TEST_SCRIPT=parallel: both calls in one message
    [
        {"tool": "lookup", "input": {"id": "A"}},
        {"tool": "charge", "input": {"id": "A", "cents": 1250}},
    ],
    FINAL,
]

REFUND_FINAL = "The refund is settled."
APPROVAL = [{"tool": "refund", "input": {"id": "A", "cents": 500}}, REFUND_FINAL]
LONG = " ".join(f"word{i}" for i in range(400))
LONG_AFTER = "A short answer this time."

PAY_FINAL = "Paid, and the receipt is on its way."
STEPS = [{"tool": "pay", "input": {"id": "A", "cents": 1250}}, PAY_FINAL]

SETTLE_FINAL = "I will check the notification before anything else."
SETTLE = [{"tool": "settle", "input": {"id": "A"}}, SETTLE_FINAL]
SETTLE_ONCE = [{"tool": "settle_once", "input": {"id": "A"}}, SETTLE_FINAL]

GHOST_TIMEOUT = 0.5
GHOST_FINAL = "The refund did not answer in time; I will check before trying again."
GHOST = [{"tool": "refund_sync", "input": {"id": "A"}}, GHOST_FINAL]
GHOST_STEP = [{"tool": "refund_steps", "input": {"id": "A"}}, GHOST_FINAL]

MODE = os.environ.get("ENGINE_TEST_SCRIPT", "")
PARALLEL_MODE = MODE == "parallel"
_timeout = os.environ.get("ENGINE_TEST_APPROVAL_TIMEOUT")
_lookup_recorded = threading.Event()


def _record(name: str, ctx: ToolContext) -> None:
    line = {
        "tool": name,
        "execution_id": ctx.execution_id,
        "attempt": ctx.attempt,
        "pid": os.getpid(),
        "at": time.time(),
    }
    with open(DIR / "runs.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def _block(name: str) -> None:
    spec = os.environ.get("ENGINE_TEST_BLOCK", "")
    tool_name, _, seconds = spec.partition(":")
    if tool_name == name:
        time.sleep(float(seconds))


@tool(idempotent=True)
def lookup(id: str, ctx: ToolContext) -> dict[str, str]:
    """Look up an order."""
    _record("lookup", ctx)
    _lookup_recorded.set()
    crash_point("in-tool:lookup")
    _block("lookup")
    return {"id": id, "status": "unpaid"}


@tool
def charge(id: str, cents: int, ctx: ToolContext) -> str:
    """Charge an order (not idempotent)."""
    if PARALLEL_MODE:
        # Both calls run together; wait (bounded) for lookup to be under way.
        _lookup_recorded.wait(timeout=10)
    _record("charge", ctx)
    crash_point("in-tool:charge")
    _block("charge")
    return f"charged {cents} cents for order {id}"


@tool(
    needs_approval=os.environ.get("ENGINE_TEST_REFUND_APPROVAL", "1") != "0",
    approval_timeout=float(_timeout) if _timeout else None,
)
def refund(id: str, cents: int, ctx: ToolContext) -> str:
    """Refund an order (needs a person's approval; not idempotent)."""
    _record("refund", ctx)
    crash_point("in-tool:refund")
    _block("refund")
    return f"refunded {cents} cents for order {id}"


@tool(needs_approval=True)
def close_account(id: str) -> str:
    """Close a customer's account (needs a person's approval)."""
    return f"closed {id}"


def _effect(effect: str, key: str) -> str:
    """A side effect outside the world (a card charged, an email sent), one line each."""
    line = {"effect": effect, "key": key, "pid": os.getpid()}
    with open(DIR / "effects.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
    crash_point(f"in-step:{effect}")
    return key


@tool(resumable=True)
async def pay(id: str, cents: int, ctx: ToolContext) -> str:
    """Charge an order, then email its receipt (each a durable step)."""
    _record("pay", ctx)
    try:
        charged = await ctx.step("charge", _effect, "charge", ctx.step_key("charge"))
    except StepInterrupted:
        return f"the charge of order {id} may have partly run; no receipt sent"
    crash_point("in-tool:pay")
    sent = await ctx.step("email", _effect, "email", ctx.step_key("email"), idempotent=True)
    return f"charged {charged}, emailed {sent}"


async def _settle(id: str, ctx: ToolContext) -> str:
    _record(ctx.tool_name, ctx)
    await ctx.step("refund", _effect, "refund", ctx.step_key("refund"))
    await ctx.step("notify", _effect, "notify", ctx.step_key("notify"))
    return f"refunded and notified {id}"


settle = tool(name="settle", resumable=True)(_settle)
settle_once = tool(name="settle_once")(_settle)


def _gated_refund(id: str, name: str) -> str:
    """Record that it started, wait for ``go``, then refund (the effect)."""
    with open(DIR / "runs.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"tool": name, "started": True, "pid": os.getpid()}) + "\n")
    for _ in range(6000):
        if (DIR / "go").exists():
            break
        time.sleep(0.01)
    _effect("refund", id)
    return f"refunded {id}"


@tool(timeout=GHOST_TIMEOUT)
def refund_sync(id: str) -> str:
    """Refund an order (sync; it may outlast its timeout)."""
    return _gated_refund(id, "refund_sync")


@tool
async def refund_steps(id: str, ctx: ToolContext) -> str:
    """Reserve, then refund an order (a sync step that may outlast a stop)."""
    await ctx.step("reserve", lambda: f"reserved {id}")
    return str(await ctx.step("refund", _gated_refund, id, "step:refund"))


TEXT_DELAY = 0.05


class Scripted(ScriptedModel):
    """The script, its text slowed by ``ENGINE_TEST_TEXT_DELAY`` until ``fast`` exists."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if self.delay > TEXT_DELAY and (DIR / "fast").exists():
            self.delay = TEXT_DELAY
        async for event in super().stream(request):
            yield event


MORE_TOOLS = {  # only where their script calls them: other tests hear the same tools
    "settle": [settle],
    "settle_once": [settle_once],
    "ghost": [refund_sync],
    "ghost_step": [refund_steps],
}
OTHER_APPROVAL = [close_account] if os.environ.get("ENGINE_TEST_OTHER_APPROVAL") == "1" else []

agent = Agent(
    Scripted(
        {
            "parallel": PARALLEL,
            "approval": APPROVAL,
            "long": [LONG, LONG_AFTER],
            "steps": STEPS,
            "settle": SETTLE,
            "settle_once": SETTLE_ONCE,
            "ghost": GHOST,
            "ghost_step": GHOST_STEP,
        }.get(MODE, SCRIPT),
        record_to=DIR / "model.jsonl",
        pieces=80 if MODE == "long" else 5,
        delay=float(os.environ.get("ENGINE_TEST_TEXT_DELAY", TEXT_DELAY)),
    ),
    tools=[lookup, charge, refund, pay, *OTHER_APPROVAL, *MORE_TOOLS.get(MODE, [])],
    instructions="You handle orders.",
    text_chunk_interval=0.0,  # every streamed piece is saved as its own chunk
)
