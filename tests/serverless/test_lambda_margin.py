"""``lambda_handler``'s margin (issue 43 item 15): with Lambda's default 3 s
timeout a turn runs (the default margin is a share of the time left, capped at
3 s), and an invocation too short to run anything says so in the log."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from fxworld import Agent
from fxworld.aws import lambda_handler
from fxworld.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)


class Context:
    """What Lambda passes the handler: the time left in the invocation."""

    def __init__(self, millis: int) -> None:
        self.millis = millis

    def get_remaining_time_in_millis(self) -> int:
        return self.millis


def _prompted(tmp_path: Path) -> tuple[str, str]:
    url = f"sqlite:///{tmp_path / 'w.db'}"

    async def create() -> str:
        client = Agent(ScriptedModel([]), world=url)
        sid = (await client.session().create("Hi")).session_id
        await client.world.close()
        return sid

    return url, asyncio.run(create())


def _event(sid: str) -> dict[str, object]:
    return {"Records": [{"messageId": "m-1", "body": json.dumps({"session_id": sid})}]}


def _kinds(url: str, sid: str) -> list[str]:
    async def read() -> list[str]:
        reader = Agent(ScriptedModel([]), world=url)
        kinds = [e.kind for e in await reader.session(sid).read()]
        await reader.world.close()
        return kinds

    return asyncio.run(read())


def test_a_turn_runs_within_lambda_s_default_3_s_timeout(tmp_path: Path) -> None:
    url, sid = _prompted(tmp_path)
    handler = lambda_handler(Agent(ScriptedModel(["Hello."]), world=url))
    assert handler(_event(sid), Context(3_000)) == {"batchItemFailures": []}
    assert _kinds(url, sid)[-1] == "turn.finished"


def test_an_invocation_too_short_to_run_says_what_to_raise(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url, sid = _prompted(tmp_path)
    handler = lambda_handler(Agent(ScriptedModel(["Hello."]), world=url))
    with caplog.at_level(logging.WARNING, "fxworld.aws"):
        answer = handler(_event(sid), Context(400))
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}  # comes back
    assert _kinds(url, sid) == ["prompt"]  # nothing ran
    assert "too short to run a turn" in caplog.text
    assert "raise the function's Timeout" in caplog.text
