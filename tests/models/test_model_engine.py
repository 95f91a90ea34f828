"""The real adapters under the turn engine, against the local provider server.

An Agent built from a model string (the SDKs' standard environment variables
point it at the server) runs turns with tool calls; errors end or retry turns as
the engine promises; a worker process SIGKILLed while the model's text streams is
replaced, its partial text is marked discarded, the model is called again, and a
reader sees each text once.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import fxworld
from fxworld import Agent, StreamEvent, TurnFailed, tool
from fxworld.testing import ScriptedModel
from tests.models.conftest import KEY
from tests.models.provider_server import (
    ProviderServer,
    Sse,
    Status,
    anthropic_stream,
    openai_stream,
)

pytestmark = pytest.mark.timeout(120)
REPO = Path(__file__).resolve().parents[2]
PROVIDERS = ["openai", "anthropic"]


def point_at(server: ProviderServer, provider: str, key: str = KEY) -> dict[str, str]:
    """The standard environment variables that send ``provider/...`` to the server."""
    if provider == "openai":
        return {
            "REAL_MODEL": "openai/gpt-test",
            "OPENAI_BASE_URL": server.url + "/v1",
            "OPENAI_API_KEY": key,
        }
    return {
        "REAL_MODEL": "anthropic/claude-test",
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": key,
    }


def stream_of(provider: str, text: Sequence[str] = (), **kw: Any) -> list[str]:
    """The frames of one streamed reply in ``provider``'s wire format."""
    return (openai_stream if provider == "openai" else anthropic_stream)(text, **kw)


def call(call_id: str, name: str, pieces: list[str]) -> dict[str, Any]:
    return {"calls": [(call_id, name, pieces)]}


@tool(idempotent=True)
def get_order(id: str) -> dict[str, str]:
    """Look up an order."""
    return {"id": id, "status": "shipped"}


async def run_turn(agent: Agent, prompt: str) -> tuple[str, str]:
    """Prompt, run a worker in this process until the turn ends; (session id, text)."""
    turn = agent.session().prompt(prompt)
    sid = (await turn.accepted).session_id
    worker = asyncio.create_task(agent.work(lease=5.0, poll_interval=0.05))
    try:
        return sid, await asyncio.wait_for(turn.result(), 60)
    finally:
        agent.stop()
        await asyncio.wait_for(worker, 30)


def visible_text(events: list[StreamEvent]) -> list[str]:
    """What a reader shows: each model call's streamed text, less discarded calls."""
    by_call: dict[str, list[str]] = {}
    for e in events:
        if e.kind == "text":
            by_call.setdefault(str(e.data["call"]), []).append(str(e.data["text"]))
        elif e.kind == "text.discarded":
            by_call.pop(str(e.data["call"]), None)
    return ["".join(parts) for parts in by_call.values()]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_agent_with_a_model_string_runs_a_turn_with_a_tool_call(
    provider: str, server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in point_at(server, provider).items():
        monkeypatch.setenv(name, value)
    server.queue(
        Sse(
            stream_of(provider, ["Looking it up."], **call("c-1", "get_order", ['{"id"', ': "A"}']))
        ),
        Sse(stream_of(provider, ["Order A ", "has shipped."])),
    )
    agent = Agent(
        os.environ["REAL_MODEL"],
        tools=[get_order],
        instructions="You answer questions about orders.",
        world=fxworld.MemoryWorld(),
    )
    sid, text = await run_turn(agent, "Where is order A?")
    assert text == "Order A has shipped."

    stored = await agent.session(sid).read()
    messages = [e.data for e in stored if e.kind == "message"]
    assert [m["model"] for m in messages] == [os.environ["REAL_MODEL"]] * 2
    assert messages[0]["tool_calls"][0]["name"] == "get_order"
    assert messages[0]["tool_calls"][0]["input"] == {"id": "A"}
    assert all(m["usage"]["input_tokens"] > 0 and m["usage"]["output_tokens"] > 0 for m in messages)
    assert [m["stop_reason"] for m in messages] == (
        ["tool_calls", "stop"] if provider == "openai" else ["tool_use", "end_turn"]
    )
    finished = [e.data for e in stored if e.kind == "tool.finished"]
    assert len(finished) == 1 and "shipped" in finished[0]["output"]

    # The second request carried the tool's result back, under the call's id.
    assert len(server.requests) == 2
    second = json.dumps(server.requests[1].body)
    assert "c-1" in second and "shipped" in second
    assert "You answer questions about orders." in second


async def test_non_retryable_error_fails_the_turn_without_the_key(
    server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "sk-wrong-0123456789ABCDEFGHIJ"
    for name, value in point_at(server, "openai", key=wrong).items():
        monkeypatch.setenv(name, value)
    agent = Agent("openai/gpt-test", world=fxworld.MemoryWorld())
    with pytest.raises(TurnFailed) as caught:
        await run_turn(agent, "Hello?")
    assert "401" in caught.value.error and "Incorrect API key provided" in caught.value.error
    stored = await agent.session(caught.value.session_id).read()
    assert wrong not in json.dumps([e.data for e in stored])
    assert "ABCDEFGHIJ" not in json.dumps([e.data for e in stored])
    assert len(server.requests) == 1  # not retried, by the adapter or the engine


async def test_retry_budget_is_not_multiplied_by_the_engine(server: ProviderServer) -> None:
    from fxworld.models import OpenAIModel, RetryPolicy

    server.queue(*[Status(503, {"error": {"message": "down", "type": "server_error"}})] * 9)
    policy = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05)
    model = OpenAIModel("gpt-test", api_key=KEY, base_url=server.url + "/v1", retry=policy)
    agent = Agent(model, world=fxworld.MemoryWorld())
    with pytest.raises(TurnFailed) as caught:
        await run_turn(agent, "Anyone there?")
    assert "HTTP 503" in caught.value.error and "gave up after 3 attempts" in caught.value.error
    assert len(server.requests) == 3


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_stream_cut_after_text_is_discarded_and_asked_again(
    provider: str, server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in point_at(server, provider).items():
        monkeypatch.setenv(name, value)
    cut = stream_of(provider, ["Half an ", "answer", " and more"])[:4]
    server.queue(Sse(cut, abort=True), Sse(stream_of(provider, ["The whole ", "answer."])))
    agent = Agent(os.environ["REAL_MODEL"], world=fxworld.MemoryWorld(), text_chunk_interval=0.0)
    sid, text = await run_turn(agent, "Answer me.")
    assert text == "The whole answer."
    events = await agent.session(sid).read()
    kinds = [e.kind for e in events]
    assert kinds.count("text.discarded") == 1
    assert any(e.kind == "text" and "Half" in e.data["text"] for e in events)
    assert visible_text(events) == ["The whole answer."]
    assert len(server.requests) == 2
    assert "Half" not in json.dumps(server.requests[1].body)  # the model never hears it


# -- a worker process SIGKILLed while the model's text streams ---------------------


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def text_of(log: Path) -> str:
    return log.read_text(errors="replace") if log.exists() else ""


async def wait_for_text(log: Path, needle: str, proc: subprocess.Popen[bytes]) -> None:
    end = time.monotonic() + 60
    while needle not in text_of(log):
        assert proc.poll() is None, f"worker exited:\n{text_of(log)}"
        assert time.monotonic() < end, f"worker never logged {needle!r}:\n{text_of(log)}"
        await asyncio.sleep(0.05)


def start_worker(
    procs: list[subprocess.Popen[bytes]],
    world_url: str,
    env: dict[str, str],
    log: Path,
    *,
    lease: float = 3.0,  # short, yet long enough for a loaded machine's first call
) -> subprocess.Popen[bytes]:
    full = dict(os.environ)
    full.update(env)
    full["PYTHONPATH"] = os.pathsep.join([str(REPO), full.get("PYTHONPATH", "")])
    with open(log, "ab") as out:
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fxworld.cli",
                "worker",
                "tests.models.real_agent:agent",
                "--world",
                world_url,
                "--lease",
                str(lease),
                "-v",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=full,
            cwd=str(log.parent),
        )
    procs.append(p)
    return p


async def test_worker_killed_while_text_streams(
    server: ProviderServer, workers: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    # One provider is enough here: what follows the cut is the engine's, and the
    # Anthropic adapter's cut streams are covered in process above. (Each worker
    # process imports an SDK, which takes seconds on a busy machine.)
    provider = "openai"
    url = f"sqlite:///{tmp_path}/world.db"
    env = point_at(server, provider)
    slow = [f"word{i} " for i in range(200)]
    server.queue(
        Sse(stream_of(provider, [], **call("c-1", "get_order", ['{"id": "A"}']))),
        Sse(stream_of(provider, slow), delay=0.1),  # cut by the SIGKILL
        Sse(stream_of(provider, ["Order A ", "has ", "shipped."])),
    )
    client = Agent(ScriptedModel([]), world=fxworld.open_world(url))
    turn = client.session().prompt("Where is order A?")
    sid = (await turn.accepted).session_id
    reader_events: list[StreamEvent] = []

    async def read() -> None:
        async for e in client.session(sid).stream(until="turn"):
            reader_events.append(e)

    reader = asyncio.create_task(read())
    first_log, second_log = tmp_path / "worker-1.log", tmp_path / "worker-2.log"
    first = start_worker(workers, url, env, first_log)
    await wait_for_text(first_log, "worker ready", first)
    # The replacement starts now, idle while the first holds the lease, so the
    # test does not wait for a second interpreter to start after the kill.
    second = start_worker(workers, url, env, second_log, lease=15.0)  # never lost to a stall

    deadline = time.monotonic() + 60
    while sum(1 for e in reader_events if e.kind == "text") < 3:
        assert first.poll() is None, text_of(first_log)
        assert time.monotonic() < deadline, f"no text streamed:\n{text_of(first_log)}"
        await asyncio.sleep(0.05)
    await wait_for_text(second_log, "worker ready", second)
    assert sum(1 for e in reader_events if e.kind == "text") < len(slow)  # still streaming
    first.send_signal(signal.SIGKILL)
    first.wait(10)

    try:
        assert await asyncio.wait_for(turn.result(), 60) == "Order A has shipped."
        await asyncio.wait_for(reader, 30)
    finally:  # shown by pytest when the test fails
        print(text_of(first_log), text_of(second_log), sep="\n")
        for e in await client.session(sid).read():
            print(e.kind, json.dumps(e.data)[:160])

    stored = await client.session(sid).read()
    kinds = [e.kind for e in stored]
    assert kinds.count("fence") == 2 and kinds.count("turn.finished") == 1
    discarded = [e.data for e in stored if e.kind == "text.discarded"]
    assert len(discarded) == 1
    cut_text = "".join(
        str(e.data["text"])
        for e in stored
        if e.kind == "text" and e.data["call"] == discarded[0]["call"]
    )
    assert cut_text.startswith("word0 word1 word2") and "word199" not in cut_text
    # The reader saw exactly what was stored, and shows each text once.
    assert [(e.kind, e.data) for e in reader_events] == [(e.kind, e.data) for e in stored]
    assert visible_text(reader_events) == ["Order A has shipped."]
    # The tool ran once; the model was asked again with the result, never the cut text.
    assert kinds.count("tool.finished") == 1
    assert len(server.requests) == 3
    assert server.requests[1].body["messages"] == server.requests[2].body["messages"]
    assert "word0" not in json.dumps(server.requests[2].body)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_typed_answer_is_validated_and_asked_again_with_the_error(
    provider: str, server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pydantic

    class Shipping(pydantic.BaseModel):
        order: str
        days: int

    for name, value in point_at(server, provider).items():
        monkeypatch.setenv(name, value)
    server.queue(
        Sse(stream_of(provider, ['{"order": "A", ', '"days": "soon"}'])),
        Sse(stream_of(provider, ['{"order": "A", ', '"days": 3}'])),
    )
    agent = Agent(os.environ["REAL_MODEL"], world=fxworld.MemoryWorld(), output_type=Shipping)
    turn = agent.session().prompt("When does order A ship?")
    worker = asyncio.create_task(agent.work(lease=5.0, poll_interval=0.05))
    try:
        answer = await asyncio.wait_for(turn, 60)
    finally:
        agent.stop()
        await asyncio.wait_for(worker, 30)
    assert answer == Shipping(order="A", days=3)
    stored = await agent.session(turn.session_id).read()
    invalid = [e.data for e in stored if e.kind == "output.invalid"]
    assert len(invalid) == 1 and invalid[0]["error"].startswith("days: ")
    assert [e.data.get("output") for e in stored if e.kind == "turn.finished"] == [
        {"order": "A", "days": 3}
    ]
    assert len(server.requests) == 2
    first, second = (json.dumps(r.body) for r in server.requests)
    assert "JSON Schema" in first and '\\"days\\"' in first  # the schema, in the instructions
    assert "does not match the required JSON Schema: days: " in second  # the model heard why
