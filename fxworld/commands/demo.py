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
import os
import shutil
import signal
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fxworld.cli import plain

if TYPE_CHECKING:
    from fxworld import Agent
    from fxworld.protocol import World

LEASE = 2.0


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
    parser.set_defaults(func=_run)


def _say(text: str = "", indent: int = 0) -> None:
    pad = " " * indent
    for line in text.split("\n"):
        print(pad + line if line else "", flush=True)


def _short(xid: str) -> str:
    return xid[:8]


class _Worker:
    def __init__(self, n: int, proc: asyncio.subprocess.Process, log: Path) -> None:
        self.n, self.proc, self.log = n, proc, log

    @property
    def pid(self) -> int:
        return self.proc.pid

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""


async def _start_worker(
    n: int, url: str, work: Path, pause: str | None, model: str | None = None
) -> _Worker:
    env = dict(os.environ, FXWORLD_DEMO_DIR=str(work))
    env.pop("FXWORLD_DEMO_PAUSE", None)
    env.pop("FXWORLD_TEST_CRASH_AT", None)
    env.pop("FXWORLD_DEMO_MODEL", None)
    if pause:
        env["FXWORLD_DEMO_PAUSE"] = pause
    if model:
        env["FXWORLD_DEMO_MODEL"] = model
    log = work / f"worker-{n}.log"
    with open(log, "wb") as out:  # noqa: ASYNC230 (a local file, opened once)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "fxworld.cli", "worker",
            "fxworld.commands._demo_agent:agent", "--world", url, "--lease", str(LEASE),
            stdout=out, stderr=asyncio.subprocess.STDOUT, env=env, cwd=work,
        )  # fmt: skip
    return _Worker(n, proc, log)


async def _wait_file(path: Path, worker: _Worker, limit: float = 20.0) -> None:
    end = time.monotonic() + limit
    while not path.exists():  # noqa: ASYNC240 (a local file, polled)
        if worker.proc.returncode is not None:
            raise RuntimeError(f"worker #{worker.n} exited early:\n{worker.tail()}")
        if time.monotonic() > end:
            raise RuntimeError(f"worker #{worker.n} never got to {path.name}:\n{worker.tail()}")
        await asyncio.sleep(0.02)


async def _kill(worker: _Worker) -> float:
    worker.proc.send_signal(signal.SIGKILL)
    await worker.proc.wait()
    return time.time()


def _runs(work: Path) -> list[dict[str, Any]]:
    f = work / "runs.jsonl"
    return [json.loads(x) for x in f.read_text().splitlines() if x] if f.exists() else []


def _describe(kind: str, data: dict[str, Any]) -> str:
    if kind == "prompt":
        return repr(data.get("text"))
    if kind == "fence":
        return f"a worker took over (epoch {data.get('epoch')})"
    if kind == "message":
        calls = data.get("tool_calls") or []
        if calls:
            return "model asks for " + ", ".join(
                f"{c['name']} (execution_id {_short(c['execution_id'])})" for c in calls
            )
        return "model's final message"
    if kind in ("tool.started", "tool.finished", "tool.interrupted"):
        extra = f", attempt {data['attempt']}" if kind == "tool.started" else ""
        if kind == "tool.finished":
            out = str(data.get("output"))
            extra = f" -> {out if len(out) <= 36 else out[:33] + '...'}"
        return f"{data.get('name')} {_short(str(data.get('execution_id')))}{extra}"
    if kind == "text":
        text = str(data.get("text"))
        return repr(text if len(text) <= 44 else text[:41] + "...")
    if kind == "turn.started":
        return f"answering the prompt at position {data.get('prompt')}"
    if kind == "turn.finished":
        return "the turn is over"
    if kind == "turn.yielded":
        return str(data.get("reason"))
    return ""


async def _run(args: argparse.Namespace) -> int:
    if args.model:
        from fxworld.commands._demo_real import run_real

        return await run_real(args)
    from fxworld import StreamEvent
    from fxworld.commands import _demo_agent as demo
    from fxworld.engine import decode_cursor

    started = time.monotonic()
    work, url, world, client = _set_up()
    workers: list[_Worker] = []
    try:
        _say("fxworld demo: one agent turn that survives two crashed workers\n")
        _say(
            f"world   {url}\n"
            "        (the embedded SQLite world: every process below opens this file)\n"
            "agent   a scripted model and two tools:\n"
            "          get_order      idempotent=True    reads an order: safe to run twice\n"
            "          refund_order   idempotent=False   moves money: must not run twice\n"
            f"workers `fxworld worker ... --lease {LEASE:g}`: a dead worker's session is taken\n"
            f"        over once its {LEASE:g} s lease runs out\n"
        )

        # 1. The prompt.
        session = client.session()
        turn = session.prompt(f"Please refund order {demo.ORDER}.")
        accepted = await turn.accepted
        _say(f"1. The client sends a prompt. Accepted: session {accepted.session_id}")
        _say("(accepted means saved, with a wake: it will be answered even if every", 3)
        _say("process dies now)\n", 3)

        # A client follows the stream live, and will lose its connection.
        before: list[StreamEvent] = []

        async def follow() -> None:
            async for ev in session.stream():
                before.append(ev)

        reader = asyncio.create_task(follow())

        # 2. Worker 1 dies inside get_order.
        w1 = await _start_worker(1, url, work, pause="get_order")
        workers.append(w1)
        _say(f"2. Worker #1 (pid {w1.pid}) starts and runs the turn.")
        await _wait_file(work / "paused-get_order", w1)
        xid_get = _runs(work)[0]["execution_id"]
        killed1 = await _kill(w1)
        _say(f"   It is inside get_order (execution_id {_short(xid_get)}): SIGKILL.", 0)
        await asyncio.sleep(0.1)  # what was saved before the kill reaches the client
        reader.cancel()  # the client's connection drops with it
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        cursor = before[-1].cursor
        _say(f"   The client's stream connection drops too; its last cursor is {cursor!r}.\n")

        # 3. Worker 2 takes over, re-runs get_order, dies inside refund_order.
        w2 = await _start_worker(2, url, work, pause="refund_order")
        workers.append(w2)
        _say(f"3. Worker #2 (pid {w2.pid}) starts.")
        await _wait_file(work / "paused-refund_order", w2)
        log = await world.read(session.id, 0, limit=10_000)
        fences = [e for e in log if e.kind == "fence"]
        took = fences[1].at.timestamp() - killed1
        _say(
            f"   It took the session over {took:.1f} s after the kill (when the lease ran out),", 0
        )
        _say("read the log and continued from the last saved step:", 3)
        runs = _runs(work)
        rerun = runs[1]
        _say(
            f"   get_order ran AGAIN, same execution_id {_short(rerun['execution_id'])}, "
            f"attempt {rerun['attempt']}:",
        )
        _say("it was started but never finished, and it is idempotent.", 5)
        xid_refund = runs[2]["execution_id"]
        _say(f"   Then refund_order (execution_id {_short(xid_refund)}) called the payment")
        _say("service; before its answer came back: SIGKILL.\n", 3)
        killed2 = await _kill(w2)

        # 4. Worker 3 finishes the turn.
        w3 = await _start_worker(3, url, work, pause=None)
        workers.append(w3)
        _say(f"4. Worker #3 (pid {w3.pid}) starts.")
        answer = await asyncio.wait_for(turn, 30)
        log = await world.read(session.id, 0, limit=10_000)
        fences = [e for e in log if e.kind == "fence"]
        took = fences[2].at.timestamp() - killed2
        interrupted = next(e for e in log if e.kind == "tool.interrupted")
        _say(f"   It took over {took:.1f} s after the kill. refund_order was started and never")
        _say("finished, and it is NOT idempotent, so it did NOT run again. The model", 3)
        _say("was told instead (a tool result with is_error=True):", 3)
        heard = [json.loads(x) for x in (work / "model.jsonl").read_text().splitlines() if x]
        told = next(
            m["text"] for h in heard for m in h["messages"] if m["role"] == "tool" and m["is_error"]
        )
        assert told == interrupted.data["message"]
        _say(textwrap.fill(told, 72, initial_indent='     "', subsequent_indent="      ") + '"')
        _say("   So the model checked with get_order first, and answered:", 0)
        _say(textwrap.fill(answer, 72, initial_indent='     "', subsequent_indent="      ") + '"\n')

        # 5. What ran.
        _say("5. What actually ran, from the tools' own records:")
        _say(f"   {'tool':<14}{'execution_id':<14}{'attempt':<9}worker")
        names = {w.pid: w.n for w in workers}
        for r in _runs(work):
            killed_inside = (r["pid"], r["tool"]) in (
                (w1.pid, "get_order"),
                (w2.pid, "refund_order"),
            )
            fate = "  (killed inside)" if killed_inside else ""
            _say(
                f"   {r['tool']:<14}{_short(r['execution_id']):<14}{r['attempt']:<9}"
                f"#{names.get(r['pid'], '?')}{fate}"
            )
        payments = (work / "payments.jsonl").read_text().splitlines()
        _say(
            f"   payment service: {len(payments)} refund of {demo.ORDER} "
            f"(idempotency key = execution_id {_short(xid_refund)})\n"
        )

        # 6. The stream, read again from the cursor.
        after = [ev async for ev in session.stream(cursor, until="turn")]
        _say("6. The client reconnects with its last cursor and reads on. What it saw:")
        seqs = []
        for i, ev in enumerate(before + after):
            seq = decode_cursor(session.id, ev.cursor)
            seqs.append(seq)
            if i == len(before):
                _say(f"   ----- reconnected with cursor {cursor!r} -----")
            _say(f"   {seq:>3}  {ev.kind:<17}{_describe(ev.kind, ev.data)}")
        assert seqs == list(range(1, len(seqs) + 1))
        _say(
            f"   Positions 1..{len(seqs)}, each exactly once: no gap and no duplicate "
            "across the reconnect.\n"
        )
        _say(f"Done in {time.monotonic() - started:.1f} s. Your own agent: see README.md and")
        _say("docs/log-format.md; run turns with `fxworld worker yourmodule:agent`.")
        return 0
    finally:
        await _clean_up(workers, world, work, keep=args.keep)


def _set_up() -> tuple[Path, str, World, Agent]:
    """A temporary directory, the SQLite world in it (its URL too), and the
    client's agent on that world (its model is never called)."""
    from fxworld import Agent, open_world
    from fxworld.testing import ScriptedModel

    work = Path(tempfile.mkdtemp(prefix="fxworld-demo-"))
    url = f"sqlite:///{work}/world.db"
    world = open_world(url)
    client = Agent(ScriptedModel(["(the client never calls the model)"]), world=world)
    return work, url, world, client


async def _clean_up(workers: list[_Worker], world: World, work: Path, *, keep: bool) -> None:
    """Stop the workers still running, close the world, remove ``work`` unless kept."""
    for w in workers:
        if w.proc.returncode is None:
            w.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(w.proc.wait(), 10)
            except TimeoutError:
                w.proc.kill()
    await world.close()
    if keep:
        _say(f"(kept {work})")
    else:
        shutil.rmtree(work, ignore_errors=True)
