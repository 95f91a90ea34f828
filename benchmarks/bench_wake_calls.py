"""World calls per serverless turn, by method: one turn driven through the wake route
and through ``fxworld.aws.lambda_handler``; prints.

    python benchmarks/bench_wake_calls.py [--world sqlite|memory] [--repeat 5]

The agent's world is wrapped in a counting world (tests/support/world_calls.py),
under its push (a recorder: what a queue would be sent), so every call the route
or the handler makes is counted: before ``agent.work()``, inside it (the run), and
after it returned (what the consumer reads to answer). Two turns each:

- ``hello``: a prompt answered in one invocation (the message is settled: done);
- ``yield``: a turn of two 0.6 s tool steps with 1.1 s per invocation: the first
  invocation yields, and its push continues the turn (the message is settled:
  yielded). Counted: that first invocation.

Each is repeated ``--repeat`` times and the calls are averaged: the worker's looks
for due wakes while a run is under way depend on timing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

from fxworld import Agent, MemoryWorld, open_world  # noqa: E402
from fxworld.aws import lambda_handler  # noqa: E402
from fxworld.protocol import World  # noqa: E402
from fxworld.push import message_body  # noqa: E402
from fxworld.testing import ScriptedModel  # noqa: E402
from fxworld.web import signed_headers, wake_handler  # noqa: E402
from tests.support.world_calls import CountingWorld, Recorder, slow_step  # noqa: E402

SECRET = "bench-secret-0123456789abcdef"


def script(kind: str) -> list[Any]:
    if kind == "hello":
        return ["Hello."]
    return [{"tool": "slow_step", "input": {"n": n}} for n in (1, 2)] + ["Done."]


def phased(agent: Agent, counting: CountingWorld) -> None:
    """Label the counting world's calls: "route" outside ``work()``, "run" inside."""
    real = agent.work

    async def work(**kwargs: Any) -> Any:
        counting.phase = "run"
        try:
            return await real(**kwargs)
        finally:
            counting.phase = "after"

    agent.work = work  # type: ignore[method-assign]


def new_world(kind: str, tmp: Path, name: str) -> tuple[World, str | None]:
    if kind == "memory":
        return MemoryWorld(), None
    url = f"sqlite:///{tmp / (name + '.db')}"
    return open_world(url), url


async def through_route(kind: str, world_kind: str, tmp: Path) -> tuple[CountingWorld, Any]:
    inner, _ = new_world(world_kind, tmp, f"route-{kind}")
    counting = CountingWorld(inner)
    push = Recorder()
    agent = Agent(ScriptedModel(script(kind)), tools=[slow_step], world=counting, push=push)  # type: ignore[arg-type]
    await agent.ready()
    sid = (await agent.session().create("Go")).session_id
    phased(agent, counting)
    counting.calls.clear()
    counting.phase = "before"
    handler = wake_handler(agent, secret=SECRET, time_limit=1.6, margin=0.5)
    body = message_body(sid)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=handler), base_url="http://bench"
    ) as client:
        r = await client.post("/", content=body, headers=signed_headers(SECRET, body))
    await inner.close()
    return counting, (r.status_code, r.json()["status"])


class Context:
    def get_remaining_time_in_millis(self) -> int:
        return 1600


async def through_lambda(kind: str, world_kind: str, tmp: Path) -> tuple[CountingWorld, Any]:
    if world_kind == "memory":  # one world, used by the handler's own loop only
        inner: World = MemoryWorld()
        prompter = Agent(ScriptedModel([]), world=inner)
    else:
        inner, url = new_world(world_kind, tmp, f"lambda-{kind}")
        prompter = Agent(ScriptedModel([]), world=url)
    sid = (await prompter.session().create("Go")).session_id
    counting = CountingWorld(inner)
    agent = Agent(ScriptedModel(script(kind)), tools=[slow_step], world=counting, push=Recorder())  # type: ignore[arg-type]
    phased(agent, counting)
    handler = lambda_handler(agent, margin=0.5, lease=2.0)
    event = {"Records": [{"messageId": "m-1", "body": message_body(sid).decode()}]}
    counting.phase = "before"
    with ThreadPoolExecutor(max_workers=1) as function:
        loop = asyncio.get_running_loop()
        answer = await loop.run_in_executor(function, handler, event, Context())
    if world_kind != "memory":
        await prompter.world.close()
    return counting, answer["batchItemFailures"]


def show(title: str, runs: list[tuple[CountingWorld, Any]]) -> None:
    n = len(runs)
    answers = sorted({json.dumps(answer) for _, answer in runs})
    total = sum(len([c for c in counting.calls if c[1] != "setup"]) for counting, _ in runs)
    print(f"{title}: {total / n:.1f} world calls per turn (answers {', '.join(answers)})")
    for phase in ("before", "run", "after"):
        calls: Counter[str] = Counter()
        for counting, _ in runs:
            calls.update(counting.by_method(phase))
        calls.pop("setup", None)
        listed = ", ".join(f"{m} {k / n:.1f}" for m, k in sorted(calls.items()))
        print(f"  {phase:6} {sum(calls.values()) / n:5.1f}  {listed}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--world", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("hello", "yield"):
            for title, drive in (("wake route", through_route), ("lambda_handler", through_lambda)):
                runs = []
                for i in range(args.repeat):
                    where = Path(tmp) / f"{title[0]}{kind}{i}"
                    where.mkdir()
                    runs.append(await drive(kind, args.world, where))
                show(f"{title}, {kind}, {args.world}", runs)


if __name__ == "__main__":
    asyncio.run(main())
