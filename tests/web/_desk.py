"""A support desk's world, written entry by entry: two tenants, a support agent and its
billing child, and one session for each thing that needs a person (the sessions
page's tests, in process and in Chromium)."""

from __future__ import annotations

from typing import Any

from fxworld import NewEntry
from fxworld.engine import log
from fxworld.protocol import World

NEEDS = {
    "t-acme-0002": ("waiting",),
    "t-globex-0001": ("failed",),
    "t-globex-0002": ("tool-error",),
    "t-acme-0003": ("interrupted",),
    "t-acme-0004": ("stopped",),
    "t-acme-0006": ("failed",),
    "t-acme-0005": ("waiting",),  # its child waits for a decision
    "child-e-credit": ("waiting",),
}
"""Why each session of the desk needs a person (``stuck`` aside: see :func:`seed`)."""
CLEAN = ("t-acme-0001", "t-globex-0004")


def _prompt(text: str, n: int, agent: str, **more: Any) -> NewEntry:
    return log.entry(log.PROMPT, text=text, key=f"k{n}", agent=agent, **more)


def _tool(eid: str, name: str, *, error: bool = False) -> list[NewEntry]:
    started = log.entry(
        log.TOOL_STARTED, execution_id=eid, call_id=eid, name=name, input={}, attempt=1
    )
    output = "ValueError: the card was declined" if error else "ok"
    finished = log.entry(
        log.TOOL_FINISHED, execution_id=eid, call_id=eid, name=name, output=output, is_error=error
    )
    return [started, finished]


async def _session(
    world: World,
    sid: str,
    text: str,
    *middles: list[NewEntry],
    end: str | None = log.TURN_FINISHED,
    agent: str = "support",
    **first: Any,
) -> None:
    """A session with one turn per ``middles`` item (its entries between the turn's
    start and end); each turn ends with ``end`` but the last may be left running
    (``end=None``); earlier turns end ``turn.failed`` if ``first['fail_first']``."""
    fail_first = first.pop("fail_first", False)
    for i, middle in enumerate(middles):
        last = i == len(middles) - 1
        seq = await world.append(sid, [_prompt(text, i, agent, **(first if i == 0 else {}))])
        fence = await world.acquire(sid)
        entries = [log.entry(log.TURN_STARTED, prompt=seq, turn=f"t{i}"), *middle]
        kind = end if last else (log.TURN_FAILED if fail_first else log.TURN_FINISHED)
        if kind is not None:
            fields = {"error": "RuntimeError: the model API is down"}
            if kind != log.TURN_FAILED:
                fields = {"text": "done", "reason": "asked"} if kind == log.TURN_STOPPED else {}
                fields.setdefault("text", "done")
            entries.append(log.entry(kind, prompt=seq, turn=f"t{i}", **fields))
        await world.append(sid, entries, fence=fence)


def _ask(eid: str, name: str) -> NewEntry:
    return log.entry(
        log.APPROVAL_REQUESTED,
        execution_id=eid,
        call_id=eid,
        name=name,
        input={"amount": 40},
        timeout=None,
        expires_at=None,
    )


async def seed(world: World, *, stuck: bool = True) -> None:
    """The desk: see the module. ``stuck``: also a prompt a worker never took
    (``t-globex-0003``, due at once: stuck once ``stuck_after`` passed)."""
    acme = {"tenant": "acme", "user": "ana"}
    globex = {"tenant": "globex", "user": "gus"}
    await _session(world, "t-acme-0001", "Where is my parcel?", [], context=acme)
    await _session(
        world,
        "t-acme-0002",
        "Credit me 40 EUR please",
        [_ask("e-credit-2", "credit")],
        end=None,
        context=acme,
    )
    await _session(
        world, "t-globex-0001", "Cancel my plan", [], end=log.TURN_FAILED, context=globex
    )
    await _session(
        world,
        "t-globex-0002",
        "Refund order 7",
        _tool("e-refund", "refund", error=True),
        context=globex,
    )
    step = log.entry(log.STEP_STARTED, execution_id="e-mail", step="email", key="e-mail:email")
    await _session(
        world,
        "t-acme-0003",
        "Email my invoice",
        [*_tool("e-mail", "send_invoice")[:1], step, _tool("e-mail", "send_invoice")[1]],
        context=acme,
    )
    await _session(
        world, "t-acme-0004", "Change my address", [], end=log.TURN_STOPPED, context=acme
    )
    await _session(
        world, "t-acme-0006", "Upgrade my plan", [], [], end=None, fail_first=True, context=acme
    )
    await _session(
        world, "t-globex-0004", "Reset my password", [], [], fail_first=True, context=globex
    )
    # a parent whose agent tool made a child; the child waits for a decision
    child = "child-e-credit"
    started = log.entry(
        log.CHILD_STARTED,
        execution_id="e-credit",
        call_id="e-credit",
        name="billing",
        session=child,
    )
    await _session(
        world,
        "t-acme-0005",
        "I was charged twice",
        [_tool("e-credit", "billing")[0], started],
        end=None,
        context=acme,
    )
    parent = {
        "session": "t-acme-0005",
        "execution_id": "e-credit",
        "call_id": "e-credit",
        "name": "billing",
        "path": ["billing"],
    }
    await _session(
        world,
        child,
        "Refund the double charge",
        [_ask("e-refund-9", "refund")],
        end=None,
        agent="billing",
        context=acme,
        parent=parent,
    )
    if stuck:
        await world.append(
            "t-globex-0003", [_prompt("Nobody answers me", 0, "support", context=globex)], wake=0
        )
