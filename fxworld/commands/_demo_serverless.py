"""``fxworld demo --serverless vercel|sqs``: the whole serverless deployment here.

A prompt is pushed to a local queue (the ``vercel-queue`` SDK's dev server, or
moto's SQS server); the queue invokes the function (the wake route in a uvicorn
process, or the Lambda handler in a fresh process per batch); there is no worker.
The turn outlasts the function's time limit, and the function is SIGKILLed in the
middle of a non-idempotent tool. The demo prints each event as the client reads
it, then one summary line; exit 0 when every turn ended exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from fxworld.commands._demo_common import say

AGENT = "fxworld.commands._demo_serverless_agent:agent"
TIME_LIMIT = 4.0
MARGIN = 1.0
LEASE = 3


async def run_serverless(args: argparse.Namespace) -> int:
    from fxworld import Agent
    from fxworld.testing import ScriptedModel

    work = Path(tempfile.mkdtemp(prefix="fxworld-demo-serverless-"))
    url = f"sqlite:///{work / 'world.db'}"
    env = {"FXWORLD_URL": url, "FXWORLD_AGENT": AGENT, "FXWORLD_DEMO_DIR": str(work)}
    started = time.monotonic()
    stop: list[Any] = []
    try:
        push, counts, name = await _deploy(args.serverless, work, env, stop)
        say(f"fxworld demo --serverless {args.serverless}: {name}, and no worker process\n")
        say(f"world     {url}\nfunction  time limit {TIME_LIMIT:g} s, lease {LEASE} s\n")
        client = Agent(ScriptedModel([]), world=url, push=push)
        stop.append(client)
        accepted = await client.session().create("Check the stock, then refund order A-1001.")
        say(f"{_t(started)} prompt saved and pushed: session {accepted.session_id}")
        ends = 0
        session = client.session(accepted.session_id)

        async def follow() -> None:
            nonlocal ends
            async for e in session.stream(accepted.cursor):
                line = _describe(e.kind, e.data)
                if line:
                    say(f"{_t(started)} {line}")
                if e.kind in ("turn.finished", "turn.failed", "turn.stopped"):
                    ends += 1
                    return

        await asyncio.wait_for(follow(), 120)
        await asyncio.sleep(0.5)  # a second end would land now
        events = await session.read()
        ends = sum(e.kind in ("turn.finished", "turn.failed", "turn.stopped") for e in events)
        refunds = _lines(work / "refund_order.runs")
        ok = ends == 1 and refunds == 1
        say(
            f"\n{'ok' if ok else 'FAILED'}: 1 turn, ended {ends} time(s); "
            f"{counts()}; refund_order ran {refunds} time(s); "
            f"{time.monotonic() - started:.1f} s"
        )
        return 0 if ok else 1
    finally:
        for thing in reversed(stop):
            if isinstance(thing, Agent):
                await thing.world.close()
            else:
                await asyncio.to_thread(thing)
        if not getattr(args, "keep", False):
            shutil.rmtree(work, ignore_errors=True)


async def _deploy(
    which: str, work: Path, env: dict[str, str], stop: list[Any]
) -> tuple[Any, Any, str]:
    if which == "sqs":
        from fxworld.localqueues.sqs import CREDENTIALS, EventSourceMapping, MotoServer
        from fxworld.push import SQSPush

        os.environ.update(CREDENTIALS)
        server = MotoServer(work / "moto.log")
        await asyncio.to_thread(server.start)
        stop.append(server.stop)
        queue = server.queue("fxworld-wakes", visibility=LEASE)
        env["FXWORLD_PUSH"] = "sqs+" + queue
        esm = EventSourceMapping(
            server, queue, env, time_limit=TIME_LIMIT, margin=MARGIN, lease=LEASE,
            log=work / "function.log",
        )  # fmt: skip
        esm.start()
        stop.append(esm.stop)

        def sqs_counts() -> str:
            return (
                f"{esm.invocations} invocations ({esm.crashed} crashed, {esm.killed} past the "
                f"time limit), {esm.received} deliveries"
            )

        return SQSPush(queue), sqs_counts, "SQS (moto's server) invoking a Lambda handler"
    from vercel.queue.devserver import embedded_queue_dev_server

    from fxworld.localqueues.vercel import DEPLOYMENT, TOPIC, Platform
    from fxworld.push import VercelQueuePush

    dev_cm = embedded_queue_dev_server(manual_clock=False)
    dev = dev_cm.__enter__()
    stop.append(lambda: dev_cm.__exit__(None, None, None))
    os.environ.update(
        VERCEL_QUEUE_BASE_URL=dev.base_url,
        VERCEL_QUEUE_TOKEN="local-token",
        VERCEL_REGION="iad1",
        VERCEL_DEPLOYMENT_ID=DEPLOYMENT,
    )
    env["FXWORLD_PUSH"] = f"vercel-queue://{TOPIC}"
    platform = Platform(
        dev, env, time_limit=TIME_LIMIT + MARGIN, lease=LEASE, log=work / "route.log"
    )
    await asyncio.to_thread(platform.start)
    stop.append(platform.stop)

    def vercel_counts() -> str:
        return (
            f"{platform.invocations} invocations ({platform.crashed} crashed, "
            f"{platform.ended} past the time limit), route started {platform.route.starts} times"
        )

    return VercelQueuePush(TOPIC), vercel_counts, "Vercel Queues (the SDK's dev server)"


def _t(started: float) -> str:
    return f"{time.monotonic() - started:5.1f}s"


def _describe(kind: str, data: dict[str, Any]) -> str:
    match kind:
        case "fence":
            return f"a function took the session (epoch {data.get('epoch')})"
        case "tool.started":
            return f"  tool {data.get('name')} started"
        case "tool.finished":
            return f"  tool {data.get('name')} finished: {str(data.get('output', ''))[:50]}"
        case "tool.interrupted":
            return (
                f"  tool {data.get('name')} was cut by the crash: not run again, the model is told"
            )
        case "turn.yielded":
            return f"turn yielded ({data.get('reason')}): the next invocation continues it"
        case "turn.finished":
            return f"answer: {data.get('text')}"
        case "turn.failed":
            return f"turn failed: {data.get('error')}"
    return ""


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0
