"""The agent ``fxworld demo`` runs in its worker processes.

Two tools over a pretend shop whose state lives in files under
``$FXWORLD_DEMO_DIR``: ``get_order`` only reads (idempotent: safe to run twice);
``refund_order`` moves money through a "payment service" that takes an
idempotency key (not idempotent on its own). ``$FXWORLD_DEMO_PAUSE`` names a tool
that stops in the middle (after its effect, before it returns) so the demo can
SIGKILL the worker right there.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from fxworld import Agent, ToolContext, tool
from fxworld.testing import ScriptedModel

ORDER = "A-1001"
ANSWER = (
    f"Order {ORDER} is refunded: the payment service shows exactly one refund. "
    "I checked before trying again, because the first attempt was cut off midway."
)
SCRIPT: list[Any] = [
    {"tool": "get_order", "input": {"order_id": ORDER}},
    {"tool": "refund_order", "input": {"order_id": ORDER}},
    # the model hears that refund_order may have partly run, so it checks first
    {"tool": "get_order", "input": {"order_id": ORDER}},
    ANSWER,
]


def _dir() -> Path:
    return Path(os.environ.get("FXWORLD_DEMO_DIR", "."))


def _record(name: str, ctx: ToolContext) -> None:
    line = {
        "tool": name,
        "execution_id": ctx.execution_id,
        "attempt": ctx.attempt,
        "pid": os.getpid(),
    }
    with open(_dir() / "runs.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def _maybe_pause(name: str) -> None:
    if os.environ.get("FXWORLD_DEMO_PAUSE") == name:
        (_dir() / f"paused-{name}").write_text(str(os.getpid()))
        time.sleep(60)  # the demo kills the process here


def _refunds(order_id: str) -> list[dict[str, Any]]:
    ledger = _dir() / "payments.jsonl"
    if not ledger.exists():
        return []
    rows = [json.loads(x) for x in ledger.read_text().splitlines() if x]
    return [r for r in rows if r["order_id"] == order_id]


@tool(idempotent=True)
def get_order(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Look up an order and its refunds."""
    _record("get_order", ctx)
    _maybe_pause("get_order")
    refunds = _refunds(order_id)
    return {
        "order_id": order_id,
        "status": "refunded" if refunds else "paid",
        "refunds": len(refunds),
    }


@tool
def refund_order(order_id: str, ctx: ToolContext) -> str:
    """Refund an order through the payment service."""
    _record("refund_order", ctx)
    # The payment service keeps one refund per idempotency key.
    if not any(r["key"] == ctx.execution_id for r in _refunds(order_id)):
        with open(_dir() / "payments.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({"order_id": order_id, "key": ctx.execution_id}) + "\n")
    _maybe_pause("refund_order")  # the money moved; the answer never comes back
    return f"refunded {order_id}"


# `fxworld demo --model provider/model` sets FXWORLD_DEMO_MODEL: a real model instead.
_MODEL = os.environ.get("FXWORLD_DEMO_MODEL")

agent = Agent(
    _MODEL or ScriptedModel(SCRIPT, record_to=_dir() / "model.jsonl", delay=0.02),
    tools=[get_order, refund_order],
    instructions="You are a support agent for a shop. Check before you retry a refund.",
)
