"""Fixtures for the engine's tests: the world under test, and worker processes.

``engine_world_url`` is THE world the process tests run against: by default each
runs twice, on a fresh SQLite file and on a fresh namespace of the session's real
PostgreSQL (``pg_url``). Another backend runs the same tests by adding an entry
to :data:`ENGINE_WORLDS` (a function of the test's fixture ``request`` and
``tmp_path`` returning the URL of a fresh, empty world that several processes can
open; it may use ``request.getfixturevalue`` to start a server) and naming it in
``FXWORLD_ENGINE_WORLDS=sqlite,postgres``, e.g.
``ENGINE_WORLDS["postgres"] = lambda request, tmp: request.getfixturevalue("pg_url")``.
Without code: ``FXWORLD_ENGINE_WORLDS=url FXWORLD_ENGINE_TEST_URL=postgresql://...``
runs them on that server, a fresh namespace per test.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
REPO = HERE.parent.parent


def _url_from_env(request: pytest.FixtureRequest, tmp: Path) -> str:
    """``FXWORLD_ENGINE_TEST_URL`` (e.g. a PostgreSQL URL) with a fresh namespace."""
    url = os.environ.get("FXWORLD_ENGINE_TEST_URL")
    if not url:
        pytest.skip("FXWORLD_ENGINE_TEST_URL is not set")
    namespace = f"engine_{uuid.uuid4().hex[:16]}"
    return f"{url}{'&' if '?' in url else '?'}namespace={namespace}"


ENGINE_WORLDS: dict[str, Callable[[pytest.FixtureRequest, Path], str]] = {
    "sqlite": lambda request, tmp: f"sqlite:///{tmp}/world.db",
    "url": _url_from_env,
    # a fresh namespace on the session's real PostgreSQL (tests/support/postgres_server.py)
    "postgres": lambda request, tmp: request.getfixturevalue("pg_url"),
    # the same server through a real PgBouncer in transaction mode (tests/support/
    # pgbouncer_server.py); only for tests that name it in their engine_worlds mark
    "pgbouncer": lambda request, tmp: request.getfixturevalue("pgbouncer_url"),
    # a fresh namespace on the session's real Redis (tests/support/redis_server.py)
    "redis": lambda request, tmp: request.getfixturevalue("redis_url"),
    # a fresh namespace on the session's real S3 server (tests/support/s3_server.py)
    "s3": lambda request, tmp: request.getfixturevalue("s3_url"),
    # only for tests that name them: a fresh namespace on a local Redis Cluster, and a
    # SQLite file that the test and its agent wrap in an EncryptedWorld
    "cluster": lambda request, tmp: (
        f"{request.getfixturevalue('redis_cluster').url}&namespace=engine_{uuid.uuid4().hex[:16]}"
    ),
    "encrypted": lambda request, tmp: f"sqlite:///{tmp}/world.db",
}
"""Worlds the engine's process tests run on: name -> ((request, tmp_path) -> URL)."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "engine_world_url" in metafunc.fixturenames:
        names = [n for n in os.environ.get("FXWORLD_ENGINE_WORLDS", "").split(",") if n]
        chosen = names or ["sqlite", "postgres", "redis", "s3"]
        only = metafunc.definition.get_closest_marker("engine_worlds")
        if only is not None:  # the worlds a test runs on (pgbouncer only where named)
            chosen = [n for n in only.args if not names or n in names]
        metafunc.parametrize("engine_world_name", chosen)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "engine_worlds(*names): run the test on these engine worlds only"
    )


@pytest.fixture
def engine_world_url(engine_world_name: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a fresh world the test and its worker processes share."""
    if engine_world_name not in ENGINE_WORLDS:
        pytest.skip(f"no engine world named {engine_world_name!r}")
    return ENGINE_WORLDS[engine_world_name](request, tmp_path)


class Proc:
    """A worker subprocess running tests/engine/crash_agent.py."""

    def __init__(self, popen: subprocess.Popen[bytes], log: Path) -> None:
        self.popen = popen
        self.log = log

    @property
    def pid(self) -> int:
        return self.popen.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_for_log(self, needle: str, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while needle not in self.text():
            if self.popen.poll() is not None:
                raise AssertionError(f"worker exited ({self.popen.returncode}):\n{self.text()}")
            if time.monotonic() > end:
                raise AssertionError(f"worker never logged {needle!r}:\n{self.text()}")
            time.sleep(0.02)

    async def wait(self, limit: float = 60.0) -> int:
        end = time.monotonic() + limit
        while self.popen.poll() is None:
            if time.monotonic() > end:
                raise AssertionError(f"worker {self.pid} did not exit:\n{self.text()}")
            await asyncio.sleep(0.02)
        return self.popen.returncode

    def signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            os.kill(self.pid, sig)


# The lease of a worker that is killed or frozen sets how long its successor waits;
# the successor itself must never lose its own lease to a stall of a loaded machine
# (it would take its session again: one more fence than the test expects).
DYING_LEASE = 2.0
SURVIVOR_LEASE = 10.0


@pytest.fixture
def start_worker(engine_world_url: str, tmp_path: Path) -> Iterator[Callable[..., Proc]]:
    """Start ``fxworld worker crash_agent:agent`` (or ``agent=``) against the test's world."""
    procs: list[Proc] = []

    def start(
        *,
        lease: float = DYING_LEASE,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
        agent: str = "crash_agent:agent",
    ) -> Proc:
        full = dict(os.environ)
        full.pop("FXWORLD_TEST_CRASH_AT", None)
        full["ENGINE_TEST_DIR"] = str(tmp_path)
        full["PYTHONPATH"] = os.pathsep.join([str(HERE), str(REPO), full.get("PYTHONPATH", "")])
        full.update(env or {})
        log = tmp_path / f"worker-{len(procs)}.log"
        with open(log, "wb") as out:
            popen = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "fxworld.cli",
                    "worker",
                    agent,
                    "--world",
                    engine_world_url,
                    "--lease",
                    str(lease),
                    "-v",
                    *args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=full,
                cwd=tmp_path,
            )
        p = Proc(popen, log)
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.popen.poll() is None:
            p.popen.send_signal(signal.SIGKILL)
            p.popen.wait(10)


_opened: list[Any] = []


def client(url: str) -> Any:
    """An agent handle in the test process, on the test's world: it prompts and
    reads, runs nothing. Its world is closed at the end of the test."""
    import crash_agent

    import fxworld

    world = fxworld.open_world(url)
    _opened.append(world)
    return fxworld.Agent(
        crash_agent.agent.model, tools=list(crash_agent.agent.tools.values()), world=world
    )


@pytest.fixture(autouse=True)
async def _close_client_worlds() -> Any:
    yield
    while _opened:
        await _opened.pop().close()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]
