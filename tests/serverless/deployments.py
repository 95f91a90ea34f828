"""The two local deployments the scenarios run on, behind one face.

- ``sqs``: moto's SQS server and an event source mapping that invokes
  ``fxworld.aws.lambda_handler`` in a fresh process per batch
  (:mod:`fxworld.localqueues.sqs`). Why moto and not an emulator that runs Lambda
  functions itself: moto's server installs with pip beside fxworld (no second
  virtualenv, no container), and the mapping is small enough to do here (receive,
  invoke under a time limit, delete only on success). What is under test (the
  handler, its partial batch responses, SQS redelivery after the visibility
  timeout) stays real, and each scenario a few seconds long.
- ``vercel``: the ``vercel-queue`` SDK's embedded dev server, and the wake route in
  its own uvicorn process (:mod:`fxworld.localqueues.vercel`).

Every function process runs ``tests/serverless/app.py`` on one SQLite file.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fxworld import Agent
from fxworld.localqueues.sqs import CREDENTIALS, EventSourceMapping, MotoServer
from fxworld.localqueues.vercel import DEPLOYMENT, Platform
from fxworld.push import Push, SQSPush, VercelQueuePush
from fxworld.testing import ScriptedModel

LEASE = 2  # the wake lease, the queue's visibility timeout or delivery lease


@contextmanager
def queue_servers(tmp: Path) -> Iterator[dict[str, Any]]:
    """Both queue servers, for a module: ``{"sqs": MotoServer, "vercel": dev server}``;
    the environment points at them while they run."""
    from vercel.queue.devserver import embedded_queue_dev_server

    saved = dict(os.environ)
    moto = MotoServer(tmp / "moto.log")
    moto.start()
    try:
        with embedded_queue_dev_server(manual_clock=False) as dev:
            os.environ.update(CREDENTIALS)
            os.environ.update(vercel_env(dev))
            yield {"sqs": moto, "vercel": dev}
    finally:
        moto.stop()
        os.environ.clear()
        os.environ.update(saved)


def vercel_env(dev: Any, deployment: str = DEPLOYMENT) -> dict[str, str]:
    return {
        "VERCEL_QUEUE_BASE_URL": dev.base_url,
        "VERCEL_QUEUE_TOKEN": "local-token",
        "VERCEL_REGION": "iad1",
        "VERCEL_DEPLOYMENT_ID": deployment,
    }


class Deployment:
    """One queue, one world file, the function; ``client`` prompts (and pushes)."""

    def __init__(self, queue: str, server: Any, tmp: Path, script: str, **env: str) -> None:
        self.queue = queue
        self.tmp = tmp
        self.url = f"sqlite:///{tmp / 'world.db'}"
        self.env = {
            "FXWORLD_URL": self.url,
            "FXWORLD_AGENT": "tests.serverless.app:agent",
            "TEST_DIR": str(tmp),
            "TEST_SCRIPT": script,
            **env,
        }
        limit = float(env.get("TIME_LIMIT", "8"))
        self.function: EventSourceMapping | Platform
        if queue == "sqs":
            self.queue_url = server.queue(f"q-{tmp.name}"[:80], visibility=LEASE)
            self.env["FXWORLD_PUSH"] = "sqs+" + self.queue_url
            self.function = EventSourceMapping(
                server, self.queue_url, self.env, time_limit=limit, margin=1.5, lease=LEASE,
                log=tmp / "function.log",
            )  # fmt: skip
        else:
            self.topic = f"t-{uuid.uuid4().hex[:12]}"  # this test's own
            self.env["FXWORLD_PUSH"] = f"vercel-queue://{self.topic}"
            self.function = Platform(server, self.env, time_limit=limit, lease=LEASE,
                                     log=tmp / "function.log", topic=self.topic)  # fmt: skip
        self.client = Agent(ScriptedModel([]), world=self.url, push=self.push())

    def push(self, broken: bool = False) -> Push:
        """A push to this deployment's queue (``broken``: to a queue that is not there)."""
        if self.queue == "sqs":
            return SQSPush(self.queue_url + ("-missing" if broken else ""))
        if broken:
            from vercel.queue import QueueClient

            return VercelQueuePush(self.topic, client=QueueClient(base_url="http://127.0.0.1:9"))
        return VercelQueuePush(self.topic)

    def start(self) -> None:
        self.function.start()

    @property
    def invocations(self) -> int:
        return self.function.invocations

    @property
    def crashed(self) -> int:
        return self.function.crashed

    def heard(self) -> list[str]:
        """What the model heard: every tool result, as JSON, in order."""
        texts = []
        for line in (self.tmp / "model.jsonl").read_text().splitlines():
            for m in json.loads(line)["messages"]:
                if m.get("role") == "tool":
                    texts.append(json.dumps(m))
        return texts

    async def answer(self, session_id: str, cursor: str, within: float = 60) -> list[str]:
        """The kinds of the turn's events, then its answer's text."""
        kinds: list[str] = []

        async def read() -> None:
            async for e in self.client.session(session_id).stream(cursor, until="turn"):
                kinds.append(e.kind)
                if e.kind == "turn.finished":
                    kinds.append(e.data["text"])

        await asyncio.wait_for(read(), within)
        return kinds

    async def close(self) -> None:
        await asyncio.to_thread(self.function.stop)
        await self.client.world.close()
