"""`fxworld demo`: watch a turn survive two SIGKILLs, in about ten seconds.

On an embedded SQLite world in a temporary directory, with a scripted model and
two tools (``get_order``, idempotent; ``refund_order``, not), it starts a worker
process, kills it in the middle of a tool, starts another, kills that one too, and
lets a third finish. It then shows what ran again and what did not (and why), the
execution ids, and the stream as a client read it across a reconnect.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import textwrap
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fxworld.cli import plain
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
    wait_file,
)

if TYPE_CHECKING:
    from fxworld import Agent, Session, StreamEvent, Turn
    from fxworld.protocol import World


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "demo",
        help="watch a turn survive worker crashes (about 10 s)",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument(
        "--model",
        metavar="PROVIDER/MODEL",
        default=None,
        help="run the demo against a real model, e.g. anthropic/claude-opus-5.5 "
        "(needs its key, or FXWORLD_GATEWAY_URL and FXWORLD_GATEWAY_KEY)",
    )
    parser.add_argument(
        "--serverless",
        choices=("vercel", "sqs"),
        default=None,
        help="the serverless deployment on local queue servers: no worker, a SIGKILL "
        "mid-tool, a time limit (needs fxworld[all])",
    )
    parser.set_defaults(func=_run)


async def _run(args: argparse.Namespace) -> int:
    if args.serverless:
        from fxworld.commands._demo_serverless import run_serverless

        return await run_serverless(args)
    if args.model:
        from fxworld.commands._demo_real import run_real

        return await run_real(args)
    started = time.monotonic()
    work, url, world, client = set_up()
    stage = _Stage(work, url, world, client)
    try:
        for act in ACTS:
            await act(stage)
        say(f"Done in {time.monotonic() - started:.1f} s. Your own agent: see README.md and")
        say("docs/log-format.md; run turns with `fxworld worker yourmodule:agent`.")
        return 0
    finally:
        await clean_up(stage.workers, world, work, keep=args.keep)


@dataclass
class _Stage:
    """What the acts share: the world and its client, the workers started so far, and
    what one act leaves for a later one (each set by the act that makes it)."""

    work: Path
    url: str
    world: World
    client: Agent
    workers: list[DemoWorker] = field(default_factory=list)
    session: Session | None = None
    turn: Turn | None = None
    before: list[StreamEvent] = field(default_factory=list)
    """What the client's stream read before its connection dropped."""
    reader: asyncio.Task[None] | None = None
    cursor: str = ""
    """The client's last cursor when its connection dropped."""
    killed: list[float] = field(default_factory=list)
    """When each killed worker died (wall clock)."""
    xid_refund: str = ""

    @property
    def live(self) -> tuple[Session, Turn]:
        assert self.session is not None and self.turn is not None, "act 1 runs first"
        return self.session, self.turn

    async def took_over(self, fence: int) -> float:
        """Seconds from the last kill to the ``fence``-th takeover (0-based)."""
        session, _ = self.live
        log = await self.world.read(session.id, 0, limit=10_000)
        fences = [e for e in log if e.kind == "fence"]
        return fences[fence].at.timestamp() - self.killed[-1]


async def _cast(stage: _Stage) -> None:
    say("fxworld demo: one agent turn that survives two crashed workers\n")
    say(
        f"world   {stage.url}\n"
        "        (the embedded SQLite world: every process below opens this file)\n"
        "agent   a scripted model and two tools:\n"
        "          get_order      idempotent=True    reads an order: safe to run twice\n"
        "          refund_order   idempotent=False   moves money: must not run twice\n"
        f"workers `fxworld worker ... --lease {LEASE:g}`: a dead worker's session is taken\n"
        f"        over once its {LEASE:g} s lease runs out\n"
    )


async def _prompt(stage: _Stage) -> None:
    """1. The prompt; a client follows the stream live, and will lose its connection."""
    from fxworld.commands._demo_agent import ORDER

    stage.session = session = stage.client.session()
    stage.turn = session.prompt(f"Please refund order {ORDER}.")
    accepted = await stage.turn.accepted
    say(f"1. The client sends a prompt. Accepted: session {accepted.session_id}")
    say("(accepted means saved, with a wake: it will be answered even if every", 3)
    say("process dies now)\n", 3)

    async def follow() -> None:
        async for ev in session.stream():
            stage.before.append(ev)

    stage.reader = asyncio.create_task(follow())


async def _first_crash(stage: _Stage) -> None:
    """2. Worker 1 dies inside get_order."""
    w1 = await start_worker(1, stage.url, stage.work, pause="get_order")
    stage.workers.append(w1)
    say(f"2. Worker #1 (pid {w1.pid}) starts and runs the turn.")
    await wait_file(stage.work / "paused-get_order", w1)
    xid_get = tool_runs(stage.work)[0]["execution_id"]
    stage.killed.append(await kill(w1))
    say(f"   It is inside get_order (execution_id {short(xid_get)}): SIGKILL.", 0)
    await asyncio.sleep(0.1)  # what was saved before the kill reaches the client
    assert stage.reader is not None, "act 1 starts the reader"
    stage.reader.cancel()  # the client's connection drops with it
    with contextlib.suppress(asyncio.CancelledError):
        await stage.reader
    stage.cursor = stage.before[-1].cursor
    say(f"   The client's stream connection drops too; its last cursor is {stage.cursor!r}.\n")


async def _second_crash(stage: _Stage) -> None:
    """3. Worker 2 takes over, re-runs get_order, dies inside refund_order."""
    w2 = await start_worker(2, stage.url, stage.work, pause="refund_order")
    stage.workers.append(w2)
    say(f"3. Worker #2 (pid {w2.pid}) starts.")
    await wait_file(stage.work / "paused-refund_order", w2)
    took = await stage.took_over(1)
    say(f"   It took the session over {took:.1f} s after the kill (when the lease ran out),", 0)
    say("read the log and continued from the last saved step:", 3)
    runs = tool_runs(stage.work)
    rerun = runs[1]
    say(
        f"   get_order ran AGAIN, same execution_id {short(rerun['execution_id'])}, "
        f"attempt {rerun['attempt']}:",
    )
    say("it was started but never finished, and it is idempotent.", 5)
    stage.xid_refund = runs[2]["execution_id"]
    say(f"   Then refund_order (execution_id {short(stage.xid_refund)}) called the payment")
    say("service; before its answer came back: SIGKILL.\n", 3)
    stage.killed.append(await kill(w2))


async def _finish(stage: _Stage) -> None:
    """4. Worker 3 finishes the turn, without running refund_order again."""
    session, turn = stage.live
    w3 = await start_worker(3, stage.url, stage.work, pause=None)
    stage.workers.append(w3)
    say(f"4. Worker #3 (pid {w3.pid}) starts.")
    answer = await asyncio.wait_for(turn, 30)
    took = await stage.took_over(2)
    log = await stage.world.read(session.id, 0, limit=10_000)
    interrupted = next(e for e in log if e.kind == "tool.interrupted")
    say(f"   It took over {took:.1f} s after the kill. refund_order was started and never")
    say("finished, and it is NOT idempotent, so it did NOT run again. The model", 3)
    say("was told instead (a tool result with is_error=True):", 3)
    model_log = (stage.work / "model.jsonl").read_text().splitlines()
    heard = [json.loads(x) for x in model_log if x]
    told = next(
        m["text"] for h in heard for m in h["messages"] if m["role"] == "tool" and m["is_error"]
    )
    assert told == interrupted.data["message"]
    say(textwrap.fill(told, 72, initial_indent='     "', subsequent_indent="      ") + '"')
    say("   So the model checked with get_order first, and answered:", 0)
    say(textwrap.fill(answer, 72, initial_indent='     "', subsequent_indent="      ") + '"\n')


async def _what_ran(stage: _Stage) -> None:
    """5. What ran, from the tools' own records."""
    from fxworld.commands._demo_agent import ORDER

    w1, w2 = stage.workers[:2]
    say("5. What actually ran, from the tools' own records:")
    say(f"   {'tool':<14}{'execution_id':<14}{'attempt':<9}worker")
    names = {w.pid: w.n for w in stage.workers}
    for r in tool_runs(stage.work):
        killed_inside = (r["pid"], r["tool"]) in (
            (w1.pid, "get_order"),
            (w2.pid, "refund_order"),
        )
        fate = "  (killed inside)" if killed_inside else ""
        say(
            f"   {r['tool']:<14}{short(r['execution_id']):<14}{r['attempt']:<9}"
            f"#{names.get(r['pid'], '?')}{fate}"
        )
    payments = (stage.work / "payments.jsonl").read_text().splitlines()
    say(
        f"   payment service: {len(payments)} refund of {ORDER} "
        f"(idempotency key = execution_id {short(stage.xid_refund)})\n"
    )


async def _reconnect(stage: _Stage) -> None:
    """6. The stream, read again from the client's last cursor."""
    from fxworld.engine import decode_cursor

    session, _ = stage.live
    after = [ev async for ev in session.stream(stage.cursor, until="turn")]
    say("6. The client reconnects with its last cursor and reads on. What it saw:")
    seqs = []
    for i, ev in enumerate(stage.before + after):
        seq = decode_cursor(session.id, ev.cursor)
        seqs.append(seq)
        if i == len(stage.before):
            say(f"   ----- reconnected with cursor {stage.cursor!r} -----")
        say(f"   {seq:>3}  {ev.kind:<17}{describe(ev.kind, ev.data)}")
    assert seqs == list(range(1, len(seqs) + 1))
    say(
        f"   Positions 1..{len(seqs)}, each exactly once: no gap and no duplicate "
        "across the reconnect.\n"
    )


ACTS: tuple[Callable[[_Stage], Awaitable[None]], ...] = (
    _cast,
    _prompt,
    _first_crash,
    _second_crash,
    _finish,
    _what_ran,
    _reconnect,
)
"""The demo in order: who plays, then the six numbered acts."""
