"""OpenAIModel against a local server speaking the chat.completion.chunk SSE format."""

from __future__ import annotations

import asyncio
import json
import time
import traceback

import pytest

from fxworld.models import (
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    OpenAIModel,
    RetryPolicy,
    TextDelta,
    ToolCall,
    ToolSpec,
)
from tests.models.conftest import HELLO, KEY, collect, texts
from tests.models.provider_server import ProviderServer, Sse, Status, openai_error, openai_stream


def model(server: ProviderServer, retry: RetryPolicy | None = None) -> OpenAIModel:
    return OpenAIModel("gpt-test", api_key=KEY, base_url=server.url + "/v1", retry=retry)


async def test_text_streams_then_one_response_with_usage(server: ProviderServer) -> None:
    server.queue(Sse(openai_stream(["Hel", "lo", " there"], usage=(12, 3))))
    events = await collect(model(server))
    assert texts(events) == ["Hel", "lo", " there"]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert [e for e in events if isinstance(e, ModelResponse)] == [final]
    assert final.text == "Hello there"
    assert final.tool_calls == ()
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (12, 3)
    assert final.stop_reason == "stop"
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == "gpt-test"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]


async def test_parallel_tool_calls_are_assembled_from_interleaved_deltas(
    server: ProviderServer,
) -> None:
    server.queue(
        Sse(
            openai_stream(
                ["Checking both."],
                calls=[
                    ("call_a", "get_order", ['{"id"', ': "A', '-1"}']),
                    ("call_b", "get_weather", ['{"city": ', '"Oslo", "days": ', "3}"]),
                ],
            )
        )
    )
    tools = [
        ToolSpec("get_order", "Look up an order.", {"type": "object"}),
        ToolSpec("get_weather", "Weather.", {"type": "object"}),
    ]
    events = await collect(model(server), ModelRequest("", [Message("user", "go")], tools))
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert final.stop_reason == "tool_calls"
    assert final.tool_calls == (
        ToolCall("call_a", "get_order", {"id": "A-1"}),
        ToolCall("call_b", "get_weather", {"city": "Oslo", "days": 3}),
    )
    body = server.requests[0].body
    assert "messages" in body and body["messages"][0] == {"role": "user", "content": "go"}
    assert body["tools"][1] == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather.",
            "parameters": {"type": "object"},
        },
    }


async def test_conversation_maps_to_chat_messages_and_large_outputs_pass_whole(
    server: ProviderServer,
) -> None:
    big = "x" * (2 * 1024 * 1024)  # 2 MiB of tool output: passed as it is
    request = ModelRequest(
        instructions="You run a shop.",
        messages=[
            Message("user", "Refund A-1 and B-2"),
            Message(
                "assistant",
                "On it.",
                tool_calls=(
                    ToolCall("c1", "refund_order", {"id": "A-1"}),
                    ToolCall("c2", "refund_order", {"id": "B-2"}),
                ),
            ),
            Message("tool", big, tool_call_id="c1"),
            Message("tool", "may have partly run", tool_call_id="c2", is_error=True),
            Message("assistant", ""),  # e.g. only discarded text: left out
            Message("user", "Thanks"),
        ],
    )
    server.queue(Sse(openai_stream(["ok"])))
    await collect(model(server), request)
    assert server.requests[0].body["messages"] == [
        {"role": "system", "content": "You run a shop."},
        {"role": "user", "content": "Refund A-1 and B-2"},
        {
            "role": "assistant",
            "content": "On it.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "refund_order", "arguments": '{"id": "A-1"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "refund_order", "arguments": '{"id": "B-2"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": big},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: may have partly run"},
        {"role": "user", "content": "Thanks"},
    ]


async def test_429_with_retry_after_then_success(server: ProviderServer) -> None:
    server.queue(
        Status(429, openai_error("Rate limit reached", "requests"), {"Retry-After": "0.4"}),
        Sse(openai_stream(["fine"])),
    )
    # A long backoff, so only Retry-After can explain a retry this soon.
    slow = RetryPolicy(max_attempts=3, base_delay=30.0, max_delay=30.0, max_elapsed=60.0)
    started = time.monotonic()
    events = await collect(model(server, slow))
    waited = time.monotonic() - started
    assert texts(events) == ["fine"]
    assert len(server.requests) == 2
    assert 0.35 <= waited < 20  # honoured the 0.4 s asked, not the 30 s backoff


async def test_sdk_retries_are_off_and_ours_are_bounded_by_count(server: ProviderServer) -> None:
    server.queue(*[Status(503, openai_error("overloaded", "server_error"))] * 5)
    policy = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.02)
    with pytest.raises(ModelError) as caught:
        await collect(model(server, policy))
    assert caught.value.retryable is False  # the budget is spent: nobody multiplies it
    assert caught.value.status == 503
    assert "overloaded" in str(caught.value) and "3 attempts" in str(caught.value)
    assert len(server.requests) == 3  # the SDK added none of its own


async def test_retries_are_bounded_by_time(server: ProviderServer) -> None:
    server.queue(
        Status(429, openai_error("slow down", "requests"), {"Retry-After": "30"}),
        Sse(openai_stream(["never"])),
    )
    policy = RetryPolicy(max_attempts=10, max_elapsed=2.0)
    with pytest.raises(ModelError) as caught:
        await collect(model(server, policy))
    assert not caught.value.retryable and caught.value.status == 429
    assert "retry budget" in str(caught.value)
    assert len(server.requests) == 1


async def test_500_mid_stream_before_text_is_retried(
    server: ProviderServer, fast_retry: RetryPolicy
) -> None:
    error_chunk = f"data: {json.dumps(openai_error('The server had an error', 'server_error'))}\n\n"
    cut = openai_stream([])[:1]
    server.queue(
        Sse([*cut, error_chunk]),  # an error object inside the 200 stream
        Sse(cut, abort=True),  # then a connection cut mid-body
        Sse(openai_stream(["recovered"])),
    )
    events = await collect(model(server, fast_retry))
    assert texts(events) == ["recovered"]
    assert len(server.requests) == 3


async def test_failure_after_text_streamed_is_raised_not_repeated(
    server: ProviderServer, fast_retry: RetryPolicy
) -> None:
    frames = openai_stream(["partial ", "answer"], done=False)[:3]
    server.queue(Sse(frames, abort=True), Sse(openai_stream(["again"])))
    seen: list[str] = []
    with pytest.raises(ModelError) as caught:
        async for event in model(server, fast_retry).stream(HELLO):
            if isinstance(event, TextDelta):
                seen.append(event.text)
    assert seen == ["partial ", "answer"]  # never followed by a second copy
    assert caught.value.retryable is True
    assert len(server.requests) == 1  # the engine decides what to do next


async def test_a_consumer_that_stops_reading_closes_the_stream(server: ProviderServer) -> None:
    server.queue(Sse(openai_stream([f"w{i} " for i in range(100)]), delay=0.05))
    events = model(server).stream(HELLO)
    first = await anext(events)
    assert first == TextDelta("w0 ")
    await events.aclose()  # e.g. the engine hands the session over
    for _ in range(200):
        if server.disconnects:
            break
        await asyncio.sleep(0.05)
    assert server.disconnects == 1


async def test_malformed_chunk_is_retried(server: ProviderServer, fast_retry: RetryPolicy) -> None:
    server.queue(
        Sse([*openai_stream([])[:1], "data: {not json\n\n"]),
        Sse(openai_stream(["good"])),
    )
    events = await collect(model(server, fast_retry))
    assert texts(events) == ["good"]
    assert len(server.requests) == 2


async def test_malformed_tool_arguments_are_an_error_not_a_guess(
    server: ProviderServer,
) -> None:
    frames = openai_stream(calls=[("c1", "get_order", ['{"id": '])])
    server.queue(Sse(frames))
    with pytest.raises(ModelError, match="not valid JSON"):
        await collect(model(server, RetryPolicy(max_attempts=1)))


async def test_tool_call_cut_by_the_token_limit_is_not_retried(server: ProviderServer) -> None:
    frames = openai_stream(calls=[("c1", "get_order", ['{"id": "A-'])], finish="length")
    server.queue(Sse(frames), Sse(frames))
    with pytest.raises(ModelError, match="token limit inside tool call 'get_order'") as caught:
        await collect(model(server))
    assert caught.value.retryable is False
    assert len(server.requests) == 1


async def test_stream_that_stops_early_is_an_error(server: ProviderServer) -> None:
    frames = [f for f in openai_stream(["half"]) if 'finish_reason": "stop' not in f]
    server.queue(Sse(frames[:2]))
    with pytest.raises(ModelError, match="before the reply was complete"):
        await collect(model(server, RetryPolicy(max_attempts=1)))


@pytest.mark.parametrize("status", [400, 404])
async def test_client_errors_are_not_retried(server: ProviderServer, status: int) -> None:
    server.queue(
        Status(status, openai_error(f"The model `gpt-test` said {status}", "invalid_request_error"))
    )
    with pytest.raises(ModelError) as caught:
        await collect(model(server))
    assert caught.value.retryable is False
    assert caught.value.status == status
    assert f"said {status}" in str(caught.value)
    assert len(server.requests) == 1


async def test_401_is_not_retried_and_never_shows_the_key(server: ProviderServer) -> None:
    wrong = "sk-wrong-key-ABCDEFGHIJKLMNOP1234"
    m = OpenAIModel("gpt-test", api_key=wrong, base_url=server.url + "/v1")
    with pytest.raises(ModelError) as caught:
        await collect(m)
    error = caught.value
    assert error.retryable is False and error.status == 401
    assert "Incorrect API key provided" in str(error)  # the provider's message ...
    assert wrong not in str(error) and "ABCDEFGHIJKL" not in str(error)  # ... scrubbed
    assert error.__context__ is None  # the SDK's exception quoting the key is not kept
    assert wrong not in "".join(traceback.format_exception(error))
    assert wrong not in repr(m)
    assert len(server.requests) == 1


async def test_unreachable_server_is_retried_then_fails(fast_retry: RetryPolicy) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    m = OpenAIModel(
        "gpt-test", api_key=KEY, base_url=f"http://127.0.0.1:{port}/v1", retry=fast_retry
    )
    with pytest.raises(ModelError) as caught:
        await collect(m)
    assert caught.value.retryable is False  # after 4 attempts
    assert "could not reach" in str(caught.value)
    assert "4 attempts" in str(caught.value)
