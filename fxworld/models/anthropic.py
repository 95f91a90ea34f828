"""AnthropicModel: Claude through the Messages API, streaming with tool use.

Uses the ``anthropic`` SDK's async client (extra ``fxworld[anthropic]``), imported
when a model is built, never when fxworld is imported.

- Reads the raw stream events: ``message_start`` (input usage),
  ``content_block_start`` (a text or ``tool_use`` block), ``content_block_delta``
  (``text_delta`` streamed as :class:`TextDelta`, ``input_json_delta`` assembled
  into the call's input), ``content_block_stop``, ``message_delta`` (stop reason,
  output usage), ``message_stop``; an ``error`` event mid-stream is translated
  like an HTTP error of its type. Other block kinds (thinking, server tools) are
  ignored.
- Credentials and endpoint: ``api_key=`` / ``base_url=``, else what the SDK finds
  (``ANTHROPIC_API_KEY`` or ``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_BASE_URL``, a
  profile).
- Conversation: instructions as ``system``; consecutive user-side content
  (prompts, tool results) merged into one user message, tool results first;
  errors as ``tool_result`` with ``is_error: true``. Empty text is left out
  (the API refuses empty text blocks).
- The SDK's own retries are off; :mod:`fxworld.models._retry` retries instead.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from typing import Any

from fxworld.errors import ConfigurationError
from fxworld.models._common import (
    ProviderModel,
    call_input,
    connection_error,
    first_client,
    other_error,
    status_error,
)
from fxworld.models._retry import (
    RetryableModelError,
    RetryPolicy,
    provider_message,
    scrub,
)
from fxworld.models.base import (
    ModelError,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCall,
    Usage,
)
from fxworld.urls import mask

__all__ = ["AnthropicModel", "to_anthropic_messages"]

# Error types of an `error` event, by the HTTP status they stand for.
_EVENT_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


class AnthropicModel(ProviderModel):
    """Claude through the Anthropic Messages API.

    ``model`` is the API's model id (``"claude-opus-5.5"``); ``name`` is what
    fxworld records (default ``"anthropic/" + model``). ``max_tokens`` bounds each
    reply (the API requires one). Raises :class:`ConfigurationError` when the SDK
    is missing or no credential is found.
    """

    sdk = "anthropic"
    client_class = "AsyncAnthropic"
    provider = "Anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        name: str | None = None,
        max_tokens: int = 8192,
        temperature: float | None = None,
        timeout: float = 120.0,
        retry: RetryPolicy | None = None,
        default_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        if max_tokens < 1:
            raise ConfigurationError("AnthropicModel: max_tokens must be at least 1")
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            name=name,
            temperature=temperature,
            timeout=timeout,
            retry=retry,
            default_headers=default_headers,
            extra_body=extra_body,
        )
        self._max_tokens = max_tokens
        probe = first_client(self._new_client, self.name, (api_key,), " (or set ANTHROPIC_API_KEY)")
        _ = probe.messages  # and loads what the SDK loads lazily, outside the loop
        if probe.api_key is None and probe.auth_token is None and probe.credentials is None:
            raise ConfigurationError(
                f"model {self.name!r}: no API key: set ANTHROPIC_API_KEY (or pass api_key=)"
            )
        self._secrets: tuple[str | None, ...] = (probe.api_key, probe.auth_token)
        self._endpoint = str(probe.base_url)
        self._keep_clients(probe)

    def __repr__(self) -> str:
        return (
            f"AnthropicModel(name={self.name!r}, model={self.model!r}, "
            f"base_url={mask(self._endpoint)!r})"
        )

    @property
    def base_url(self) -> str:
        """The endpoint, credentials masked."""
        return mask(self._endpoint)

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The request body this model sends for ``request``."""
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self._max_tokens,
            "messages": to_anthropic_messages(request),
            "stream": True,
        }
        if request.instructions:
            body["system"] = request.instructions
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in request.tools
            ]
        if self._temperature is not None:
            body["temperature"] = self._temperature
        return body

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        client = await self._clients.get()
        stream = await self._open(client.messages.create, **self.params(request))
        failure: ModelError | None = None
        text: list[str] = []
        blocks: dict[int, _Block] = {}
        input_tokens = 0
        output_tokens = 0
        stop_reason: str | None = None
        stopped = False
        extra: dict[str, Any] = {}
        try:
            async with stream:
                async for event in stream:
                    kind = event.type
                    if kind == "message_start":
                        message = event.message
                        extra = {"id": message.id, "model": message.model}
                        input_tokens = _input_tokens(message.usage)
                        output_tokens = message.usage.output_tokens or 0
                    elif kind == "content_block_start":
                        block = event.content_block
                        if block.type == "text":
                            blocks[event.index] = _Block("text")
                            if block.text:
                                text.append(block.text)
                                yield TextDelta(block.text)
                        elif block.type == "tool_use":
                            blocks[event.index] = _Block(
                                "tool_use", id=block.id, name=block.name, start=block.input
                            )
                    elif kind == "content_block_delta":
                        delta = event.delta
                        if delta.type == "text_delta" and delta.text:
                            text.append(delta.text)
                            yield TextDelta(delta.text)
                        elif delta.type == "input_json_delta":
                            held = blocks.get(event.index)
                            if held is not None:
                                held.json.append(delta.partial_json)
                    elif kind == "message_delta":
                        stop_reason = event.delta.stop_reason or stop_reason
                        usage = event.usage
                        output_tokens = usage.output_tokens or output_tokens
                        input_tokens = max(input_tokens, _input_tokens(usage))
                    elif kind == "message_stop":
                        stopped = True
        except Exception as e:
            failure = self._translate(e, streaming=True)
        if failure is not None:
            raise failure
        if not stopped:
            raise RetryableModelError(
                f"{self.name}: the stream ended before the reply was complete"
            )
        cut = stop_reason == "max_tokens"
        calls = tuple(
            blocks[i].call(self.name, cut=cut)
            for i in sorted(blocks)
            if blocks[i].kind == "tool_use"
        )
        yield ModelResponse(
            text="".join(text),
            tool_calls=calls,
            usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens),
            stop_reason=stop_reason,
            extra=extra,
        )

    def _translate(self, e: BaseException, *, streaming: bool = False) -> ModelError:
        """The one boundary where anthropic SDK and transport errors become ModelError."""
        sdk = self._sdk
        if isinstance(e, ModelError):
            return e
        if isinstance(e, sdk.APIStatusError):
            headers = e.response.headers
            kind, detail = provider_message(e.body, e.message)
            status = e.status_code
            if status < 400:  # an `error` event inside a 200 stream
                status = _EVENT_STATUS.get(kind or "", 500)
                where = "error event in stream"
            else:
                where = f"HTTP {status}"
            label = where + (f" {kind}" if kind else "")
            return status_error(self.name, label, detail, status, headers, self._secrets)
        if isinstance(e, sdk.APIConnectionError):
            return connection_error(
                self.name, mask(self._endpoint), e.message, self._secrets, streaming=streaming
            )
        if isinstance(e, sdk.APIError):
            kind, detail = provider_message(e.body, e.message)
            return RetryableModelError(
                scrub(f"{self.name}: error in stream ({kind}): {detail}", self._secrets)
            )
        return other_error(self.name, e, self._secrets)


def _input_tokens(usage: Any) -> int:
    total = 0
    for attr in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        value = getattr(usage, attr, None)
        if isinstance(value, int):
            total += value
    return total


@dataclass
class _Block:
    kind: str
    id: str = ""
    name: str = ""
    start: object = None
    json: list[str] = field(default_factory=list)

    def call(self, model: str, *, cut: bool = False) -> ToolCall:
        raw = "".join(self.json)
        parsed = call_input(model, self.name, raw, cut=cut) if raw.strip() else self.start
        return ToolCall(
            id=self.id, name=self.name, input=parsed if isinstance(parsed, dict) else {}
        )


def to_anthropic_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The Messages API ``messages`` for ``request`` (roles alternate)."""
    out: list[dict[str, Any]] = []

    def push(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in request.messages:
        if m.role == "user":
            push("user", [{"type": "text", "text": m.text}] if m.text else [])
        elif m.role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.text}] if m.text else []
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.input}
                for c in m.tool_calls
            ]
            push("assistant", blocks)
        else:
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id or ""}
            if m.text:
                result["content"] = m.text
            if m.is_error:
                result["is_error"] = True
            push("user", [result])
    for msg in out:
        if msg["role"] == "user":
            # The API wants a message's tool results before its text.
            msg["content"].sort(key=lambda b: 0 if b["type"] == "tool_result" else 1)
    return out
