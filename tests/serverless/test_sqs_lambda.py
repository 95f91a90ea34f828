"""SQS with Lambda, on moto's SQS server: the scenarios of docs/serverless.md.

Why moto and not an emulator that runs Lambda functions itself: moto's server
installs with pip beside fxworld (no second virtualenv, no container), and the
event source mapping is small enough to do here (``esm.py``): receive, invoke in
a fresh process under a time limit, delete only on success. That keeps what is
under test (the handler, its partial batch responses, SQS redelivery after the
visibility timeout) real, and each scenario a few seconds long.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from fxworld import Agent
from fxworld.localqueues.sqs import CREDENTIALS, EventSourceMapping, MotoServer
from fxworld.push import SQSPush, tick
from fxworld.testing import ScriptedModel

REPO = Path(__file__).resolve().parents[2]

LEASE = 2.0  # the wake lease, and the queue's visibility timeout


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)


class Deployment:
    """A queue, a world file, and the mapping that invokes the function."""

    def __init__(self, moto: MotoServer, tmp: Path, script: str, **env: str) -> None:
        self.tmp = tmp
        self.url = f"sqlite:///{tmp / 'world.db'}"
        self.queue_url = moto.queue(f"q-{tmp.name}"[:80], visibility=int(LEASE))
        self.push_url = "sqs+" + self.queue_url
        self.env = {
            "FXWORLD_URL": self.url,
            "FXWORLD_PUSH": self.push_url,
            "TEST_DIR": str(tmp),
            "TEST_SCRIPT": script,
            "FXWORLD_AGENT": "tests.serverless.app:agent",
            **env,
        }
        self.esm = EventSourceMapping(
            moto,
            self.queue_url,
            self.env,
            time_limit=float(env.get("TIME_LIMIT", "8")),
            margin=1.5,
            lease=LEASE,
            log=tmp / "function.log",
        )
        self.client = Agent(ScriptedModel([]), world=self.url, push=self.push_url)

    def heard(self) -> list[str]:
        """What the model heard: every tool result's text, in order."""
        texts = []
        for line in (self.tmp / "model.jsonl").read_text().splitlines():
            for m in json.loads(line)["messages"]:
                if m.get("role") == "tool":
                    texts.append(json.dumps(m))
        return texts

    async def answer(self, session_id: str, cursor: str, within: float = 60) -> list[str]:
        kinds = []

        async def read() -> None:
            async for e in self.client.session(session_id).stream(cursor, until="turn"):
                kinds.append(e.kind)
                if e.kind == "turn.finished":
                    kinds.append(e.data["text"])

        await asyncio.wait_for(read(), within)
        return kinds


@pytest.fixture
async def deploy(moto: MotoServer, tmp_path: Path) -> AsyncIterator[object]:
    made: list[Deployment] = []

    def make(script: str, **env: str) -> Deployment:
        d = Deployment(moto, tmp_path, script, **env)
        made.append(d)
        return d

    yield make
    for d in made:
        await asyncio.to_thread(d.esm.stop)
        await d.client.world.close()


async def test_a_prompt_runs_to_its_answer_with_no_worker(deploy) -> None:  # type: ignore[no-untyped-def]
    d = deploy("hello")
    d.esm.start()
    accepted = await d.client.session().create("Hi")
    kinds = await d.answer(accepted.session_id, accepted.cursor)
    assert kinds[-2:] == ["turn.finished", "Hello from a function."]
    assert d.esm.invocations >= 1


async def test_a_function_killed_mid_tool_continues_after_redelivery_tool_not_rerun(deploy) -> None:  # type: ignore[no-untyped-def]
    d = deploy("refund", TEST_KILL_IN_TOOL="1")
    d.esm.start()
    accepted = await d.client.session().create("Refund o-1")
    kinds = await d.answer(accepted.session_id, accepted.cursor)
    assert kinds[-1] == "Checked; all good."
    assert d.esm.crashed >= 1  # the function died (SIGKILL) in the tool
    assert (d.tmp / "refund-o-1").read_text().count("x") == 1  # never run again
    assert any("may have partly run" in h for h in d.heard())  # the model was told


async def test_a_turn_three_times_the_time_limit_finishes_over_several_invocations(deploy) -> None:  # type: ignore[no-untyped-def]
    d = deploy("long", TEST_STEP_SECONDS="1.2", TIME_LIMIT="4")
    d.esm.start()
    accepted = await d.client.session().create("Go long")
    kinds = await d.answer(accepted.session_id, accepted.cursor, within=120)
    assert kinds[-1] == "Long turn over."
    assert kinds.count("turn.yielded") >= 2
    assert kinds.count("turn.finished") == 1
    assert d.esm.invocations >= 3


async def test_a_push_that_failed_is_recovered_by_the_tick(deploy, caplog) -> None:  # type: ignore[no-untyped-def]
    d = deploy("hello")
    broken = Agent(ScriptedModel([]), world=d.url, push=SQSPush(d.queue_url + "-missing"))
    accepted = await broken.session().create("Hi")  # accepted though the push fails
    assert "push for session" in caplog.text
    assert broken.world.stats.failed == 1  # type: ignore[attr-defined]
    await broken.world.close()
    d.esm.start()
    await asyncio.sleep(3)  # nothing rings: the wake waits in the world
    assert d.esm.invocations == 0
    push = SQSPush(d.queue_url)
    sent = await tick(d.client.world, push, overdue=0.0)
    await push.close()
    assert sent == 1
    kinds = await d.answer(accepted.session_id, accepted.cursor)
    assert kinds[-1] == "Hello from a function."


async def test_fifty_sessions_prompted_at_once_all_finish_none_twice(deploy) -> None:  # type: ignore[no-untyped-def]
    d = deploy("hello")
    d.esm.start(pollers=3)
    made = await asyncio.gather(*(d.client.session().create("Hi") for _ in range(50)))
    ends = await asyncio.gather(*(d.answer(a.session_id, a.cursor, 120) for a in made))
    assert all(k[-1] == "Hello from a function." for k in ends)
    for a in made:
        events = await d.client.session(a.session_id).read()
        assert [e.kind for e in events].count("turn.finished") == 1


async def test_an_approval_decided_from_another_process_pushes_and_resumes(deploy) -> None:  # type: ignore[no-untyped-def]
    d = deploy("approve")
    d.esm.start()
    accepted = await d.client.session().create("Delete a-1")
    s = d.client.session(accepted.session_id)
    for _ in range(300):
        pending = await s.pending_approvals()
        if pending:
            break
        await asyncio.sleep(0.1)
    assert pending
    env = {**os.environ, **d.env}
    await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "fxworld.cli", "sessions", "approve", accepted.session_id,
         pending[0].execution_id, "--world", d.url],
        cwd=REPO, env=env, check=True, timeout=60,
    )  # fmt: skip
    kinds = await d.answer(accepted.session_id, accepted.cursor)
    assert kinds[-1] == "Deleted."
    assert (d.tmp / "delete-a-1").read_text().count("x") == 1
