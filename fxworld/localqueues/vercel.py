"""What Vercel does around a queue-triggered function, on this machine.

The queue is the ``vercel-queue`` SDK's embedded dev server (its own HTTP server,
on a free port). :class:`Platform` takes each push delivery the server hands out
for the topic (leased, with its receipt handle) and POSTs it to the route, a
uvicorn process. An invocation that runs past the time limit is ended (the
process is killed and started again, as Vercel ends a function at maxDuration);
a route process that died (SIGKILL) is started again for the next delivery. A
delivery that got no answer is not settled: the server hands it out again once
its lease runs out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from fxworld.localqueues.ports import free_port

TOPIC = "fxworld-wakes"
CONSUMER = "fxworld"
DEPLOYMENT = "dpl_fxworld_test"


class Route:
    """The route's uvicorn process (``app``: the ASGI app, ``module:attribute``);
    started again after it died."""

    def __init__(
        self, env: dict[str, str], log: Path, app: str = "fxworld.localqueues.vercel_route:app"
    ) -> None:
        self.env = env
        self.app = app
        self.log = log
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def ensure(self) -> None:
        with self.lock:
            if self.proc is not None and self.proc.poll() is None:
                return
            cmd = [sys.executable, "-m", "uvicorn", self.app]
            cmd += ["--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"]
            with open(self.log, "ab") as out:
                self.proc = subprocess.Popen(cmd, env=self.env, stdout=out, stderr=out)
            self.starts += 1
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    httpx.get(self.url, timeout=1.0)
                    return
                except httpx.TransportError:
                    if self.proc.poll() is not None:
                        break
                    time.sleep(0.05)
            raise RuntimeError(f"the route did not start: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        with self.lock:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


class Platform:
    """See the module: the deliveries of ``topic`` to the consumer group ``consumer``
    (two platforms of one topic with two groups each get every message: fan-out).
    ``invocations``, ``ended`` (time limit), ``crashed``: counts."""

    def __init__(
        self,
        dev: Any,
        env: dict[str, str],
        *,
        time_limit: float,
        lease: int,
        log: Path,
        topic: str = TOPIC,
        consumer: str = CONSUMER,
    ) -> None:
        self.dev = dev
        self.topic = topic
        self.consumer = consumer  # a consumer group: each gets every message of the topic
        self.lease = lease
        self.time_limit = time_limit
        self.route = Route(
            {
                **os.environ,
                **env,
                "VERCEL_QUEUE_BASE_URL": dev.base_url,
                "VERCEL_QUEUE_TOKEN": "local-token",
                "VERCEL_REGION": "iad1",
                "VERCEL_DEPLOYMENT_ID": DEPLOYMENT,
                "TIME_LIMIT": str(time_limit),
                "TEST_LEASE": str(lease),
            },
            log,
        )
        self.invocations = 0
        self.ended = 0
        self.crashed = 0
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=8)
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self.route.ensure()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._pool.shutdown(wait=True)
        self.route.kill()

    def _loop(self) -> None:
        while not self._stop.is_set():
            got = False
            for delivery in self.dev.app.iter_push_deliveries(
                self.topic, self.consumer, lease_seconds=self.lease, deployment=DEPLOYMENT
            ):
                got = True
                self._pool.submit(self._invoke, delivery)
            if not got:
                time.sleep(0.05)

    def _invoke(self, delivery: Any) -> None:
        self.invocations += 1
        self.route.ensure()
        try:
            httpx.post(
                self.route.url, content=delivery.body, headers=delivery.headers,
                timeout=self.time_limit,
            )  # fmt: skip
        except httpx.TimeoutException:
            self.ended += 1
            self.route.kill()  # past maxDuration: the function is ended
        except httpx.TransportError:
            self.crashed += 1  # the function died mid-invocation
