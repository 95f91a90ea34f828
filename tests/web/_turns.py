"""Sessions with turns of every outcome, written entry by entry as a worker writes
them (the inspector's tests and screenshots read them)."""

from __future__ import annotations

from typing import Any

from fxworld import NewEntry
from fxworld.engine import log
from fxworld.protocol import World


def call(n: str, name: str, **input: Any) -> dict[str, Any]:
    return {"id": f"c{n}", "name": name, "input": input, "execution_id": f"x{n}"}


def started(c: dict[str, Any], attempt: int = 1) -> NewEntry:
    return log.entry(
        log.TOOL_STARTED,
        execution_id=c["execution_id"],
        call_id=c["id"],
        name=c["name"],
        input=c["input"],
        attempt=attempt,
    )


def finished(c: dict[str, Any], output: str, is_error: bool = False) -> NewEntry:
    return log.entry(
        log.TOOL_FINISHED,
        execution_id=c["execution_id"],
        call_id=c["id"],
        name=c["name"],
        output=output,
        is_error=is_error,
    )


def message(name: str, text: str, *calls: dict[str, Any]) -> NewEntry:
    usage = {"input_tokens": 120, "output_tokens": 30}
    return log.entry(
        log.MESSAGE, call=name, model="claude", text=text, tool_calls=list(calls), usage=usage
    )


async def turn(world: World, sid: str, prompt: str, *entries: NewEntry) -> int:
    """A prompt, then a worker's turn answering it (its entries fenced); the
    prompt's seq."""
    seq = await world.append(sid, [log.entry(log.PROMPT, text=prompt, key=f"{sid}-{prompt}")])
    fence = await world.acquire(sid)
    head = [log.entry(log.TURN_STARTED, prompt=seq, turn=f"t{seq}")]
    await world.append(sid, [*head, *entries], fence=fence)
    return seq


async def finished_turn(world: World, sid: str) -> None:
    c = call(f"{sid}1", "get_order", id="A-1041")
    p = await turn(
        world,
        sid,
        "Where is order A-1041?",
        message("m1", "", c),
        started(c),
        finished(c, '{"status": "shipped", "carrier": "DHL"}'),
        message("m2", "Order A-1041 shipped yesterday with DHL."),
    )
    await world.append(
        sid, [log.entry(log.TURN_FINISHED, prompt=p, turn=f"t{p}", text="Order A-1041 shipped.")]
    )


async def failed_turn(world: World, sid: str) -> None:
    c = call(f"{sid}2", "get_invoice", id="A-1041")
    p = await turn(
        world,
        sid,
        "Send me the invoice for A-1041.",
        message("m3", "", c),
        started(c),
        finished(c, "billing service timed out", is_error=True),
    )
    error = "model error: overloaded (529) after 5 attempts"
    await world.append(sid, [log.entry(log.TURN_FAILED, prompt=p, turn=f"t{p}", error=error)])


async def waiting_turn(world: World, sid: str) -> None:
    c = call(f"{sid}3", "refund_order", id="A-1041", amount=49.9)
    await turn(
        world,
        sid,
        "Refund it, please.",
        message("m4", "", c),
        log.entry(
            log.APPROVAL_REQUESTED,
            execution_id=c["execution_id"],
            call_id=c["id"],
            name=c["name"],
            input=c["input"],
            timeout=None,
            expires_at=None,
        ),
    )


async def interrupted_turn(world: World, sid: str) -> None:
    c = call(f"{sid}4", "charge_card", amount=10)
    p = await turn(world, sid, "Charge the card.", message("m5", "", c), started(c))
    fence = await world.acquire(sid)  # the worker died mid-tool
    text = "The call was started, but the process running it stopped. It was NOT run again."
    interrupted = log.entry(
        log.TOOL_INTERRUPTED,
        execution_id=c["execution_id"],
        call_id=c["id"],
        name=c["name"],
        message=text,
    )
    end = log.entry(log.TURN_FINISHED, prompt=p, turn=f"t{p}", text="")
    after = [interrupted, message("m6", "I could not confirm it."), end]
    await world.append(sid, after, fence=fence)


async def seed(world: World) -> None:
    """``s-finished``: one finished turn; ``s-failed``: a finished turn, then a failed
    one; ``s-waiting``: a finished turn, then one waiting for approval;
    ``s-interrupted``: a call found started after a crash; ``s-running``: a turn
    that runs."""
    await finished_turn(world, "s-finished")
    await finished_turn(world, "s-failed")
    await failed_turn(world, "s-failed")
    await finished_turn(world, "s-waiting")
    await waiting_turn(world, "s-waiting")
    await interrupted_turn(world, "s-interrupted")
    c = call("r5", "search_kb", query="return policy")
    await turn(world, "s-running", "What is the return policy?", message("m7", "", c), started(c))
