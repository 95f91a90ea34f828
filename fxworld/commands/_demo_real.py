"""``fxworld demo --model provider/model``: the demo's crash, with a real model.

The same shop and tools as the scripted demo (``_demo_agent``), but the model is
real, so what it does is its own choice. When it calls ``refund_order``, the
worker is SIGKILLed inside that call (after the payment service moved the money,
before the tool returned); a second worker takes the session over, and the model
hears that the refund may have partly run. The demo shows the stream, what ran,
the payments, and the tokens each model call used.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import textwrap
import time

from fxworld.commands._demo_common import (
    LEASE,
    DemoWorker,
    clean_up,
    describe,
    kill,
    say,
    set_up,
    short,
    start_worker,
    tool_runs,
)

__all__ = ["run_real"]

TIME_LIMIT = 180.0


async def run_real(args: argparse.Namespace) -> int:
    from fxworld import TurnFailed
    from fxworld.commands import _demo_agent as demo
    from fxworld.models.resolve import resolve_model

    model = resolve_model(args.model)  # ConfigurationError now, saying what to set
    started = time.monotonic()
    work, url, world, client = set_up()
    workers: list[DemoWorker] = []
    answer_task: asyncio.Task[str] | None = None
    try:
        say(f"fxworld demo with a real model: {model.name}\n")
        say(
            f"world   {url}\n"
            f"model   {model!r}\n"
            "agent   two tools: get_order (idempotent), refund_order (not idempotent)\n"
        )
        session = client.session()
        turn = session.prompt(f"Please refund order {demo.ORDER}.")
        await turn.accepted
        say(f"1. The client sends a prompt; it is saved. Session {session.id}")
        answer_task = asyncio.ensure_future(turn.result())

        w1 = await start_worker(1, url, work, pause="refund_order", model=args.model)
        workers.append(w1)
        say(f"2. Worker #1 (pid {w1.pid}) runs the turn with {model.name}.")
        paused = work / "paused-refund_order"
        end = time.monotonic() + TIME_LIMIT
        while not paused.exists() and not answer_task.done():
            if w1.proc.returncode is not None:
                raise RuntimeError(f"worker #1 exited early:\n{w1.tail()}")
            if time.monotonic() > end:
                raise RuntimeError(f"no answer in {TIME_LIMIT:.0f} s:\n{w1.tail()}")
            await asyncio.sleep(0.05)
        if paused.exists():
            xid = next(r["execution_id"] for r in tool_runs(work) if r["tool"] == "refund_order")
            await kill(w1)
            say(f"   The model called refund_order (execution_id {short(xid)}); the payment")
            say("service moved the money, and before the tool returned: SIGKILL.", 3)
            w2 = await start_worker(2, url, work, pause=None, model=args.model)
            workers.append(w2)
            say(f"3. Worker #2 (pid {w2.pid}) takes over once the {LEASE:g} s lease runs out.")
            say("refund_order is not idempotent: it does not run again; the model hears", 3)
            say("that it may have partly run, and decides.", 3)
        else:
            say("   The model answered without calling refund_order: nothing to interrupt.")
        try:
            answer = await asyncio.wait_for(answer_task, TIME_LIMIT)
        except TurnFailed as failed:
            say(f"\nThe turn failed: {failed.error}")
            return 1
        say("\nThe answer:")
        say(textwrap.fill(answer, 72, initial_indent='   "', subsequent_indent="    ") + '"\n')

        log = await world.read(session.id, 0, limit=10_000)
        say("The stream (text chunks folded):")
        last_kind = ""
        for e in log:
            if e.kind == "text" and last_kind == "text":
                continue
            last_kind = e.kind
            say(f"   {e.seq:>3}  {e.kind:<17}{describe(e.kind, e.data)}")
        names = {w.pid: w.n for w in workers}
        say("\nWhat ran:")
        for r in tool_runs(work):
            say(
                f"   {r['tool']:<14}{short(r['execution_id']):<10}attempt {r['attempt']}  "
                f"worker #{names.get(r['pid'], '?')}"
            )
        payments_file = work / "payments.jsonl"
        payments = payments_file.read_text().splitlines() if payments_file.exists() else []
        say(f"   payment service: {len(payments)} refund(s) of {demo.ORDER}")
        total_in = total_out = 0
        for e in log:
            usage = e.data.get("usage") if e.kind == "message" else None
            if isinstance(usage, dict):
                total_in += int(usage.get("input_tokens") or 0)
                total_out += int(usage.get("output_tokens") or 0)
        say(f"   tokens: {total_in} in, {total_out} out")
        say(f"\nDone in {time.monotonic() - started:.1f} s.")
        return 0
    finally:
        if answer_task is not None and not answer_task.done():
            answer_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await answer_task
        await clean_up(workers, world, work, keep=args.keep)
