"""AnthropicModel against a local server speaking the Messages streaming events."""

from __future__ import annotations

import time
import traceback

import pytest

from fxworld.models import (
    AnthropicModel,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    RetryPolicy,
    TextDelta,
    ToolCall,
    ToolSpec,
)
from tests.models.conftest import HELLO, KEY, collect, texts
from tests.models.provider_server import (
    ProviderServer,
    Sse,
    Status,
    anthropic_error,
    anthropic_error_event,
    anthropic_stream,
)


def model(server: ProviderServer, retry: RetryPolicy | None = None) -> AnthropicModel:
    return AnthropicModel("claude-test", api_key=KEY, base_url=server.url, retry=retry)


async def test_text_deltas_then_one_response_with_usage(server: ProviderServer) -> None:
    server.queue(Sse(anthropic_stream(["Hel", "lo"], usage=(30, 4))))
    events = await collect(model(server))
    assert texts(events) == ["Hel", "lo"]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert [e for e in events if isinstance(e, ModelResponse)] == [final]
    assert final.text == "Hello"
    assert final.stop_reason == "end_turn"
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (30, 4)
    sent = server.requests[0]
    assert sent.path == "/v1/messages"
    assert KEY in (sent.headers.get("x-api-key"), sent.headers.get("Authorization", "")[7:])
    assert sent.body["model"] == "claude-test"
    assert sent.body["system"] == "Be brief."
    assert sent.body["stream"] is True and sent.body["max_tokens"] == 8192
    assert sent.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]


async def test_parallel_tool_use_from_input_json_deltas(server: ProviderServer) -> None:
    server.queue(
        Sse(
            anthropic_stream(
                ["Let me check."],
                calls=[
                    ("toolu_1", "get_order", ['{"id": "A', '-1"}']),
                    ("toolu_2", "get_weather", ["", '{"city": "Oslo",', ' "days": 3}']),
                    ("toolu_3", "ping", []),  # no input at all
                ],
            )
        )
    )
    tools = [ToolSpec("get_order", "Look up an order.", {"type": "object"})]
    events = await collect(model(server), ModelRequest("", [Message("user", "go")], tools))
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert final.text == "Let me check."
    assert final.stop_reason == "tool_use"
    assert final.tool_calls == (
        ToolCall("toolu_1", "get_order", {"id": "A-1"}),
        ToolCall("toolu_2", "get_weather", {"city": "Oslo", "days": 3}),
        ToolCall("toolu_3", "ping", {}),
    )
    body = server.requests[0].body
    assert "system" not in body
    assert body["tools"] == [
        {
            "name": "get_order",
            "description": "Look up an order.",
            "input_schema": {"type": "object"},
        }
    ]


async def test_conversation_maps_to_alternating_messages(server: ProviderServer) -> None:
    big = "y" * (2 * 1024 * 1024)
    request = ModelRequest(
        instructions="You run a shop.",
        messages=[
            Message("user", "Refund A-1 and B-2"),
            Message(
                "assistant",
                "On it.",
                tool_calls=(
                    ToolCall("t1", "refund_order", {"id": "A-1"}),
                    ToolCall("t2", "refund_order", {"id": "B-2"}),
                ),
            ),
            Message("tool", big, tool_call_id="t1"),
            Message("tool", "may have partly run", tool_call_id="t2", is_error=True),
            Message("user", "Also check C-3"),
            Message("assistant", ""),  # only discarded text: left out
            Message("user", "Thanks"),
        ],
    )
    server.queue(Sse(anthropic_stream(["ok"])))
    await collect(model(server), request)
    assert server.requests[0].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Refund A-1 and B-2"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "On it."},
                {"type": "tool_use", "id": "t1", "name": "refund_order", "input": {"id": "A-1"}},
                {"type": "tool_use", "id": "t2", "name": "refund_order", "input": {"id": "B-2"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": big},
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": "may have partly run",
                    "is_error": True,
                },
                {"type": "text", "text": "Also check C-3"},
                {"type": "text", "text": "Thanks"},
            ],
        },
    ]


async def test_429_with_retry_after_then_success(server: ProviderServer) -> None:
    server.queue(
        Status(
            429,
            anthropic_error("rate_limit_error", "Number of requests has exceeded your rate limit"),
            {"retry-after": "0.4"},
        ),
        Sse(anthropic_stream(["fine"])),
    )
    slow = RetryPolicy(max_attempts=3, base_delay=30.0, max_delay=30.0, max_elapsed=60.0)
    started = time.monotonic()
    events = await collect(model(server, slow))
    assert texts(events) == ["fine"]
    assert len(server.requests) == 2
    assert 0.35 <= time.monotonic() - started < 20


async def test_overloaded_529_retried_then_gives_up(server: ProviderServer) -> None:
    server.queue(*[Status(529, anthropic_error("overloaded_error", "Overloaded"))] * 4)
    with pytest.raises(ModelError) as caught:
        await collect(model(server, RetryPolicy(max_attempts=2, base_delay=0.01)))
    assert not caught.value.retryable and caught.value.status == 529
    assert "Overloaded" in str(caught.value)
    assert len(server.requests) == 2  # none of the SDK's own retries


async def test_error_event_mid_stream_before_text_is_retried(
    server: ProviderServer, fast_retry: RetryPolicy
) -> None:
    head = anthropic_stream(["x"])[:2]  # message_start, ping
    server.queue(
        Sse([*head, anthropic_error_event("api_error", "Internal server error")]),
        Sse(head, abort=True),
        Sse(anthropic_stream(["back"])),
    )
    events = await collect(model(server, fast_retry))
    assert texts(events) == ["back"]
    assert len(server.requests) == 3


async def test_error_event_that_is_not_retryable(server: ProviderServer) -> None:
    head = anthropic_stream(["x"])[:2]
    server.queue(Sse([*head, anthropic_error_event("invalid_request_error", "prompt is too long")]))
    with pytest.raises(ModelError) as caught:
        await collect(model(server))
    assert caught.value.retryable is False and caught.value.status == 400
    assert "prompt is too long" in str(caught.value)
    assert len(server.requests) == 1


async def test_failure_after_text_streamed_is_raised_not_repeated(
    server: ProviderServer, fast_retry: RetryPolicy
) -> None:
    frames = anthropic_stream(["partial ", "answer"])[:5]  # start, ping, block, 2 deltas
    server.queue(
        Sse([*frames, anthropic_error_event("overloaded_error", "Overloaded")]),
        Sse(anthropic_stream(["again"])),
    )
    seen: list[str] = []
    with pytest.raises(ModelError) as caught:
        async for event in model(server, fast_retry).stream(HELLO):
            if isinstance(event, TextDelta):
                seen.append(event.text)
    assert seen == ["partial ", "answer"]
    assert caught.value.retryable is True and caught.value.status == 529
    assert len(server.requests) == 1


async def test_malformed_chunk_is_retried(server: ProviderServer, fast_retry: RetryPolicy) -> None:
    head = anthropic_stream(["x"])[:1]
    server.queue(
        Sse([*head, "event: content_block_start\ndata: {oops\n\n"]),
        Sse(anthropic_stream(["good"])),
    )
    events = await collect(model(server, fast_retry))
    assert texts(events) == ["good"]
    assert len(server.requests) == 2


async def test_tool_use_cut_at_max_tokens_is_not_retried(server: ProviderServer) -> None:
    frames = anthropic_stream(calls=[("t", "get_order", ['{"id": "A-'])], stop_reason="max_tokens")
    server.queue(Sse(frames), Sse(frames))
    with pytest.raises(
        ModelError,
        match="token limit inside tool call 'get_order': give the model a higher max_tokens",
    ) as caught:
        await collect(model(server))
    assert caught.value.retryable is False
    assert len(server.requests) == 1


async def test_stream_without_message_stop_is_an_error(server: ProviderServer) -> None:
    server.queue(Sse(anthropic_stream(calls=[("t", "f", ["{}"])], stop=False)))
    with pytest.raises(ModelError, match="before the reply was complete"):
        await collect(model(server, RetryPolicy(max_attempts=1)))


@pytest.mark.parametrize(
    ("status", "kind"), [(400, "invalid_request_error"), (404, "not_found_error")]
)
async def test_client_errors_are_not_retried(
    server: ProviderServer, status: int, kind: str
) -> None:
    server.queue(Status(status, anthropic_error(kind, f"model: claude-test ({status})")))
    with pytest.raises(ModelError) as caught:
        await collect(model(server))
    assert caught.value.retryable is False and caught.value.status == status
    assert f"model: claude-test ({status})" in str(caught.value)
    assert len(server.requests) == 1


async def test_401_is_not_retried_and_never_shows_the_key(server: ProviderServer) -> None:
    wrong = "sk-ant-wrong-ZYXWVUTSRQPONMLK9876"
    m = AnthropicModel("claude-test", api_key=wrong, base_url=server.url)
    with pytest.raises(ModelError) as caught:
        await collect(m)
    error = caught.value
    assert error.retryable is False and error.status == 401
    assert "invalid x-api-key" in str(error)
    assert wrong not in str(error) and "ZYXWVUTSRQPO" not in str(error)
    assert error.__context__ is None
    assert wrong not in "".join(traceback.format_exception(error))
    assert wrong not in repr(m)
    assert len(server.requests) == 1
