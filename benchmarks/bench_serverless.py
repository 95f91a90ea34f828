"""Benchmark the serverless deployments beside a long-running worker; prints.

    python benchmarks/bench_serverless.py [--latency 20] [--sessions 50] [--only sqs]
        [--script long --time-limit 4 --step 0.4]

Three ways to run the same agent (tests/serverless/app.py: a scripted model, one
text answer) on the same kind of world (a SQLite file shared by every process):

- ``worker``: one ``fxworld worker`` process, polling for wakes (no push);
- ``sqs``: ``SQSPush`` to moto's SQS server, and an event source mapping that
  invokes ``fxworld.aws.lambda_handler`` in a fresh process per batch
  (tests/serverless/esm.py): every invocation is a cold start;
- ``vercel``: ``VercelQueuePush`` to the ``vercel-queue`` SDK's embedded dev
  server, delivered to the wake route in one uvicorn process
  (tests/serverless/vercel_platform.py): a warm function.

Figures: prompt -> first step (``create()`` called to the turn's first entry
read back), p50 and p99 over ``--latency`` prompts one after another; turns/s with
``--sessions`` prompted at once; queue deliveries and function invocations per
turn (over both phases): ``pushed`` counts the messages the prompting process
sent, ``deliveries`` the messages the queue handed to a function (a duplicate or a
redelivery counts again), ``invocations`` the function calls (an SQS batch carries
up to 10 messages; an invocation runs every due session, so a message that arrives
after its turn ran is acknowledged at once).

``--script long`` runs a turn of six tool steps (``--step`` seconds each) instead,
with ``--time-limit`` seconds per invocation: a turn longer than the time limit
yields and goes on in the next invocation, so its messages per turn count the
continuations too (one per invocation the turn needed, when nothing is delivered
twice).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from fxworld import Agent  # noqa: E402
from fxworld.push import SQSPush, VercelQueuePush  # noqa: E402
from fxworld.testing import ScriptedModel  # noqa: E402


async def first_step(client: Agent) -> tuple[float, Any]:
    started = time.monotonic()
    accepted = await client.session().create("Hi")
    async for _ in client.session(accepted.session_id).stream(accepted.cursor):
        return time.monotonic() - started, accepted
    raise RuntimeError("no step")


async def end(client: Agent, sid: str, cursor: str) -> None:
    async for _ in client.session(sid).stream(cursor, until="turn"):
        pass


async def all_finish(client: Agent, n: int) -> float:
    started = time.monotonic()
    made = await asyncio.gather(*(client.session().create("Hi") for _ in range(n)))
    await asyncio.gather(*(end(client, a.session_id, a.cursor) for a in made))
    return time.monotonic() - started


async def measure(name: str, client: Agent, args: argparse.Namespace) -> dict[str, Any]:
    firsts = [await first_step(client) for _ in range(args.latency)]
    took = await all_finish(client, args.sessions)
    await asyncio.gather(*(end(client, a.session_id, a.cursor) for _, a in firsts))
    lat = sorted(t for t, _ in firsts)
    world = client.world
    return {
        "pushed": getattr(getattr(world, "stats", None), "sent", 0),
        "name": name,
        "p50": statistics.median(lat),
        "p99": lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))],
        "tps": args.sessions / took,
        "turns": args.latency + args.sessions,
    }


def env_for(tmp: Path) -> dict[str, str]:
    return {
        "FXWORLD_URL": f"sqlite:///{tmp / 'world.db'}",
        "TEST_DIR": str(tmp),
        "FXWORLD_AGENT": "tests.serverless.app:agent",
    }


async def worker(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-serverless-worker-"))
    env = {**os.environ, **env_for(tmp)}
    env.pop("FXWORLD_PUSH", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "fxworld.cli", "worker", "tests.serverless.app:agent",
        cwd=REPO, env=env, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    client = Agent(ScriptedModel([]), world=env_for(tmp)["FXWORLD_URL"])
    try:
        got = await measure("worker", client, args)
    finally:
        proc.terminate()
        await proc.wait()
        await client.world.close()
    return {**got, "deliveries": 0.0, "invocations": 0.0}


async def sqs(args: argparse.Namespace) -> dict[str, Any]:
    from fxworld.localqueues.sqs import CREDENTIALS, EventSourceMapping, MotoServer

    os.environ.update(CREDENTIALS)
    tmp = Path(tempfile.mkdtemp(prefix="bench-serverless-sqs-"))
    server = MotoServer(tmp / "moto.log")
    server.start()
    queue = server.queue("bench", visibility=15)
    env = {**env_for(tmp), "FXWORLD_PUSH": "sqs+" + queue}
    esm = EventSourceMapping(
        server, queue, env, time_limit=args.time_limit, margin=min(3.0, args.time_limit / 3),
        lease=15, log=tmp / "fn.log",
    )  # fmt: skip
    esm.start(pollers=3)
    client = Agent(ScriptedModel([]), world=env["FXWORLD_URL"], push=SQSPush(queue))
    try:
        got = await measure("sqs+lambda", client, args)
        for _ in range(300):  # let the mapping take every message left (bounded: 30 s)
            if not server.holds_messages(queue):
                break
            await asyncio.sleep(0.1)
    finally:
        await asyncio.to_thread(esm.stop)
        await client.world.close()
        server.stop()
    t = got["turns"]
    return {**got, "deliveries": esm.received / t, "invocations": esm.invocations / t}


async def vercel(args: argparse.Namespace) -> dict[str, Any]:
    from vercel.queue.devserver import embedded_queue_dev_server

    from fxworld.localqueues.vercel import DEPLOYMENT, TOPIC, Platform

    tmp = Path(tempfile.mkdtemp(prefix="bench-serverless-vercel-"))
    with embedded_queue_dev_server(manual_clock=False) as dev:
        os.environ.update(
            VERCEL_QUEUE_BASE_URL=dev.base_url,
            VERCEL_QUEUE_TOKEN="local-token",
            VERCEL_REGION="iad1",
            VERCEL_DEPLOYMENT_ID=DEPLOYMENT,
        )
        env = {**env_for(tmp), "FXWORLD_PUSH": f"vercel-queue://{TOPIC}"}
        platform = Platform(dev, env, time_limit=args.time_limit, lease=15, log=tmp / "route.log")
        platform.start()
        client = Agent(ScriptedModel([]), world=env["FXWORLD_URL"], push=VercelQueuePush(TOPIC))
        try:
            got = await measure("vercel", client, args)
            seen, quiet = platform.invocations, 0
            for _ in range(600):  # until no delivery for 3 s (bounded: 60 s): redeliveries count
                await asyncio.sleep(0.1)
                quiet = quiet + 1 if platform.invocations == seen else 0
                seen = platform.invocations
                if quiet >= 30:
                    break
        finally:
            await asyncio.to_thread(platform.stop)
            await client.world.close()
    t = got["turns"]
    return {**got, "deliveries": platform.invocations / t, "invocations": platform.invocations / t}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--only", choices=("worker", "sqs", "vercel"), default=None)
    parser.add_argument("--script", choices=("hello", "long"), default="hello")
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--step", type=float, default=0.4)
    args = parser.parse_args()
    os.environ["TEST_SCRIPT"] = args.script
    os.environ["TEST_STEP_SECONDS"] = str(args.step)
    rows = []
    for name, run in (("worker", worker), ("sqs", sqs), ("vercel", vercel)):
        if args.only in (None, name):
            rows.append(await run(args))
    print(
        f"{'':12} {'first step p50':>15} {'p99':>8} {'turns/s (' + str(args.sessions) + ')':>14}"
        f" {'pushed/turn':>12} {'deliveries/turn':>16} {'invocations/turn':>17}"
    )
    for r in rows:
        print(
            f"{r['name']:12} {r['p50'] * 1000:>13.0f}ms {r['p99'] * 1000:>6.0f}ms "
            f"{r['tps']:>14.1f} {r['pushed'] / r['turns']:>12.2f} {r['deliveries']:>16.2f}"
            f" {r['invocations']:>17.2f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
