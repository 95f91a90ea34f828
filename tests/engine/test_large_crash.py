"""A 32 MiB tool result survives a worker SIGKILLed while it saves the result and
while it reads it back, on every shared world (issue 46).

``write``: the worker is killed as the tool returns, while the engine encodes and
sends the result; the next worker finds it saved whole, or not at all and runs the
tool again (it is idempotent: the same execution id, attempt 2). ``read``: the
worker that saved the result dies at once (``after-tool-finished``); the next one
is killed while it reads the session back; a third finishes the turn. Either way
the turn ends once, the model hears the whole page, and no entry holds a part of it.
"""

from __future__ import annotations

import asyncio
import base64
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import big_agent
import pytest
from conftest import SURVIVOR_LEASE, read_jsonl

from fxworld import Agent, EncryptedWorld, World, open_world

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.engine_worlds(
        "sqlite", "postgres", "pgbouncer", "redis", "cluster", "s3", "encrypted"
    ),
]
KEYS = base64.b64encode(bytes(range(32))).decode()


@pytest.fixture
async def world(
    engine_world_name: str, engine_world_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[World]:
    """The test's own handle on the world (encrypted for ``encrypted``); the workers
    it starts inherit the keys and ``FXWORLD_URL``."""
    monkeypatch.setenv("FXWORLD_ENCRYPTION_KEYS", f"k:{KEYS}")
    monkeypatch.setenv("FXWORLD_URL", engine_world_url)
    inner = open_world(engine_world_url)
    w: World = EncryptedWorld.from_env(inner) if engine_world_name == "encrypted" else inner
    await w.setup()
    yield w
    await w.close()


def _returned(tmp: Path) -> bool:
    return any(tmp.glob("returned-*"))


async def _until(check: object, what: str, limit: float = 120.0) -> None:
    end = time.monotonic() + limit
    while not check():  # type: ignore[operator]
        assert time.monotonic() < end, f"never {what}"
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("point", ["write", "read"])
async def test_a_32_mib_tool_result_survives_a_killed_worker(
    point: str, engine_world_name: str, world: World, start_worker, tmp_path: Path
) -> None:
    env = {"ENGINE_TEST_ENCRYPTED": "1" if engine_world_name == "encrypted" else "0"}
    agent = Agent(big_agent.agent.model, tools=[big_agent.fetch_page], world=world)
    turn = agent.session().prompt("Read the long page.")
    sid = (await turn.accepted).session_id

    def spawn(lease: float | None = None, crash_at: str | None = None) -> Any:
        more = {"FXWORLD_TEST_CRASH_AT": crash_at} if crash_at else {}
        extra = {} if lease is None else {"lease": lease}
        workers.append(start_worker(agent="big_agent:agent", env={**env, **more}, **extra))
        return workers[-1]

    workers: list[Any] = []

    if point == "write":
        first = spawn()
        await _until(lambda: _returned(tmp_path), "returned")
        first.signal(signal.SIGKILL)  # the result is being encoded or sent
        assert await first.wait() == -signal.SIGKILL
    else:
        # a lease that outlasts saving 32 MiB on a loaded machine: a save that took
        # longer would be fenced out by its own retake, and the tool run again
        first = spawn(lease=6.0, crash_at="after-tool-finished")
        assert await first.wait() == -signal.SIGKILL, first.text()
        reader = spawn()  # takes the session over once the lease runs out, reads it
        await asyncio.to_thread(reader.wait_for_log, f"session {sid}: taken", 60)
        reader.signal(signal.SIGKILL)
        assert await reader.wait() == -signal.SIGKILL
    last = spawn(lease=SURVIVOR_LEASE)
    assert await asyncio.wait_for(turn, 120) == big_agent.FINAL
    last.signal(signal.SIGTERM)
    assert await last.wait() == 0, last.text()

    whole = (len(big_agent.page()), big_agent.digest(big_agent.page()))
    assert read_jsonl(tmp_path / "model.jsonl")[-1]["tool_results"] == [list(whole)]
    stored = await agent.session(sid).read()
    kinds = [e.kind for e in stored]
    assert kinds.count("turn.finished") == 1 and "turn.failed" not in kinds
    finished = [e for e in stored if e.kind == "tool.finished"]
    assert len(finished) == 1  # saved once, whole: no part of it anywhere
    assert big_agent.digest(finished[0].data["output"]) == whole[1]
    runs = read_jsonl(tmp_path / "runs.jsonl")
    assert len({r["execution_id"] for r in runs}) == 1  # an idempotent re-run at most
    assert [r["attempt"] for r in runs] == list(range(1, len(runs) + 1))
    if point == "read":  # its result was saved: never run again
        assert len(runs) == 1, "\n".join(w.text()[-3000:] for w in workers)
