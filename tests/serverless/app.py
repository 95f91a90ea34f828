"""The agent the serverless tests deploy: a ScriptedModel and two tools.

Read from the environment of each function process: ``FXWORLD_URL`` (a shared
SQLite file), ``FXWORLD_PUSH`` (the queue), ``TEST_DIR`` (where tools leave marks
and the model records what it heard), ``TEST_SCRIPT`` (which script).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from fxworld import Agent, tool
from fxworld.testing import ScriptedModel

DIR = Path(os.environ.get("TEST_DIR", "."))


def _mark(name: str) -> int:
    """Append one line to ``DIR/name``; how many lines it has now."""
    with open(DIR / name, "a") as f:
        f.write("x\n")
    return len((DIR / name).read_text().splitlines())


@tool
def refund_order(id: str) -> str:
    """Refund an order (not idempotent). Its first run SIGKILLs its own process
    while it runs, as a crashed function would be."""
    runs = _mark(f"refund-{id}")
    if runs == 1 and os.environ.get("TEST_KILL_IN_TOOL"):
        os.kill(os.getpid(), signal.SIGKILL)
    return f"refunded {id}"


@tool(idempotent=True)
def slow_step(n: int) -> str:
    """Sleep a while (idempotent)."""
    time.sleep(float(os.environ.get("TEST_STEP_SECONDS", "1")))
    return f"step {n} done"


@tool(idempotent=True)
def crash_function() -> str:
    """Kills its own process every time it runs (idempotent: run again after each
    crash), as a run that exhausts the function's memory would."""
    _mark("crash")
    os.kill(os.getpid(), signal.SIGKILL)
    return "never"


@tool(needs_approval=True)
def delete_account(id: str) -> str:
    """Needs a person's approval."""
    _mark(f"delete-{id}")
    return f"deleted {id}"


SCRIPTS = {
    "hello": ["Hello from a function."],
    "refund": [{"tool": "refund_order", "input": {"id": "o-1"}}, "Checked; all good."],
    "long": [*({"tool": "slow_step", "input": {"n": i}} for i in range(6)), "Long turn over."],
    "approve": [{"tool": "delete_account", "input": {"id": "a-1"}}, "Deleted."],
    "crash": [{"tool": "crash_function", "input": {}}, "Never answered."],
    "chat": [f"Answer {i}." for i in range(1, 41)],  # one per prompt of a session
}

agent = Agent(
    ScriptedModel(
        SCRIPTS[os.environ.get("TEST_SCRIPT", "hello")],
        record_to=DIR / "model.jsonl",
        delay=float(os.environ.get("TEST_MODEL_DELAY", "0")),  # per streamed piece
    ),
    tools=[refund_order, slow_step, delete_account, crash_function],
    max_deliveries=int(os.environ.get("TEST_MAX_DELIVERIES", "10")),
)
