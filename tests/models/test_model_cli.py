"""The CLI with real adapters: `fxworld demo --model`, `fxworld sessions show` tokens."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fxworld
from fxworld import Agent, tool
from fxworld.cli import main
from tests.models.conftest import KEY
from tests.models.provider_server import ProviderServer, Sse, openai_stream

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(180)
def test_demo_with_a_real_model(server: ProviderServer, tmp_path: Path) -> None:
    order = '{"order_id": "A-1001"}'
    answer = "Order A-1001 is refunded, exactly once: I checked before trying again."
    # Through a gateway (OpenAI-compatible), as the product page's agents run.
    server.script(
        Sse(openai_stream(["Let me look."], calls=[("c1", "get_order", [order])])),
        Sse(openai_stream(calls=[("c2", "refund_order", [order])])),
        # told that the refund may have partly run, the model checks first
        Sse(openai_stream(calls=[("c3", "get_order", [order])])),
        Sse(
            openai_stream(
                ["Order A-1001 is refunded, ", "exactly once: ", "I checked before trying again."]
            )
        ),
    )
    env = dict(os.environ, FXWORLD_GATEWAY_URL=server.url + "/v1", FXWORLD_GATEWAY_KEY=KEY)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "fxworld.cli", "demo", "--model", "anthropic/claude-test"],
        capture_output=True,
        text=True,
        timeout=170,
        cwd=tmp_path,
        env=env,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "fxworld demo with a real model: anthropic/claude-test" in out
    assert "The model called refund_order" in out and "SIGKILL" in out
    assert " ".join(answer.split()) in " ".join(out.split())
    assert "payment service: 1 refund(s) of A-1001" in out
    assert "tokens: " in out and "tokens: 0 in" not in out
    assert KEY not in out + proc.stderr
    # The model heard that the refund may have partly run, as an error result.
    assert all(r.body["model"] == "anthropic/claude-test" for r in server.requests)
    told = [
        m
        for r in server.requests
        for m in r.body["messages"]
        if m["role"] == "tool" and m["content"].startswith("Error: ")
    ]
    assert told and "may have partly run" in json.dumps(told[0])
    assert not list(tmp_path.iterdir()), "the demo leaves nothing in the working directory"


def test_demo_with_a_model_and_no_key_says_what_to_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--model", "anthropic/claude-test"]) == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err


@tool(idempotent=True)
def get_order(id: str) -> dict[str, str]:
    """Look up an order."""
    return {"id": id, "status": "shipped"}


async def test_sessions_show_prints_tokens_per_turn(
    server: ProviderServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fxworld.models import OpenAIModel

    server.queue(
        Sse(openai_stream(calls=[("c1", "get_order", ['{"id": "A"}'])], usage=(100, 20))),
        Sse(openai_stream(["Shipped."], usage=(150, 5))),
        Sse(openai_stream(["You're welcome."], usage=(170, 4))),
    )
    url = f"sqlite:///{tmp_path}/world.db"
    model = OpenAIModel("gpt-test", api_key=KEY, base_url=server.url + "/v1")
    agent = Agent(model, tools=[get_order], world=fxworld.open_world(url))
    session = agent.session("tokens-1")
    first = session.prompt("Where is order A?")
    second = session.prompt("Thanks!")
    await first.accepted
    await second.accepted
    worker = asyncio.create_task(agent.work(until_idle=True, poll_interval=0.05))
    assert await first == "Shipped."
    assert await second == "You're welcome."
    await worker

    assert await main_async(["sessions", "show", "tokens-1", "--world", url]) == 0
    out = capsys.readouterr().out
    summary = out.split("tokens per turn:\n", 1)[1].splitlines()
    assert summary == [
        "  turn 1 (prompt at seq 1): 2 model calls, 250 input + 25 output tokens, finished",
        "  turn 2 (prompt at seq 2): 1 model call, 170 input + 4 output tokens, finished",
    ]


async def main_async(argv: list[str]) -> int:
    """`fxworld ...` from a test that already runs an event loop."""
    return await asyncio.to_thread(main, argv)
