"""The agent ``fxworld demo --serverless`` deploys: a scripted model, two tools.

``check_stock`` (idempotent) takes 1.5 s, three times: longer than the function's
time limit together. ``refund_order`` (not idempotent) kills its own process the
first time it runs, as a crashed function would be killed: its turn goes on after
the queue's redelivery, the refund is not run again, and the model is told.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from fxworld import Agent, tool
from fxworld.testing import Reply, ScriptedModel

DIR = Path(os.environ.get("FXWORLD_DEMO_DIR", "."))
STEP_SECONDS = 1.5


@tool(idempotent=True)
def check_stock(warehouse: int) -> str:
    """Count the stock of one warehouse (slow; safe to run twice)."""
    time.sleep(STEP_SECONDS)
    with open(DIR / "check_stock.runs", "a") as f:
        f.write(f"{warehouse}\n")
    return f"warehouse {warehouse}: 12 left"


@tool
def refund_order(order_id: str) -> str:
    """Refund an order (moves money: must not run twice)."""
    with open(DIR / "refund_order.runs", "a") as f:
        f.write(f"{order_id} pid {os.getpid()}\n")
    if not (DIR / "killed").exists():
        (DIR / "killed").write_text("once")
        os.kill(os.getpid(), signal.SIGKILL)  # the function dies in the middle of the refund
    return f"refunded {order_id}"


SCRIPT: list[Reply] = [
    {"tool": "check_stock", "input": {"warehouse": 1}},
    {"tool": "check_stock", "input": {"warehouse": 2}},
    {"tool": "check_stock", "input": {"warehouse": 3}},
    {"tool": "refund_order", "input": {"order_id": "A-1001"}},
    "The refund of A-1001 may have partly run before a crash, so I did not repeat it: "
    "please check the payment before trying again.",
]

agent = Agent(ScriptedModel(SCRIPT), tools=[check_stock, refund_order])
