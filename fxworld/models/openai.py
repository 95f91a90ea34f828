"""OpenAIModel: chat completions on any OpenAI-compatible endpoint.

Covers OpenAI itself and everything that speaks its chat-completions API: AI
gateways, OpenRouter, vLLM, Ollama, a LiteLLM proxy. Uses the ``openai`` SDK's
async client (extra ``fxworld[openai]``), imported when a model is built, never
when fxworld is imported.

- Streams text (``delta.content``) as :class:`TextDelta`; assembles parallel tool
  calls from their ``tool_calls`` deltas (by ``index``); asks for usage with
  ``stream_options={"include_usage": true}`` (turn off with ``stream_usage=False``
  for a server that refuses it).
- Credentials and endpoint: ``api_key=`` / ``base_url=``, else the SDK's
  ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``. ``api_key`` may be an async function
  returning the key: it is called for every request (a token that is refreshed,
  such as Vercel's OIDC token, is never kept).
- The SDK's own retries are off; :mod:`fxworld.models._retry` retries instead.
- Tool results go as ``role: "tool"`` messages with their text as is; an error
  result (``is_error``) is prefixed with ``"Error: "``, since the API has no flag.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
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
    should_retry_status,
)
from fxworld.models.base import (
    Message,
    ModelError,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCall,
    Usage,
)
from fxworld.urls import mask

__all__ = ["OpenAIModel", "to_openai_messages"]

_FATAL_KINDS = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "permission_denied",
        "not_found_error",
        "invalid_api_key",
        "model_not_found",
        "context_length_exceeded",
    }
)


class OpenAIModel(ProviderModel):
    """A model behind an OpenAI-compatible chat-completions endpoint.

    ``model`` is the id the endpoint knows (``"gpt-5"``, or for a gateway the
    whole ``"anthropic/claude-…"`` string); ``name`` is what fxworld records
    (default: ``"openai/" + model``). ``max_tokens`` and ``temperature`` are
    sent only when given; ``extra_body`` is merged into each request.
    Raises :class:`ConfigurationError` when the SDK is missing or no key is set.
    """

    sdk = "openai"
    client_class = "AsyncOpenAI"
    provider = "OpenAI"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | Callable[[], Awaitable[str]] | None = None,
        base_url: str | None = None,
        name: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        timeout: float = 120.0,
        retry: RetryPolicy | None = None,
        default_headers: Mapping[str, str] | None = None,
        stream_usage: bool = True,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        self._key_source = api_key if callable(api_key) else None
        self._keys_used: list[str] = []  # the latest few from _key_source, to scrub
        if callable(api_key):
            api_key = None
        super().__init__(
            model,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or None,
            base_url=base_url or os.environ.get("OPENAI_BASE_URL") or None,
            name=name,
            temperature=temperature,
            timeout=timeout,
            retry=retry,
            default_headers=default_headers,
            extra_body=extra_body,
        )
        if self._api_key is None and self._key_source is None:
            raise ConfigurationError(
                f"model {self.name!r}: no API key: set OPENAI_API_KEY (or pass api_key=; "
                "for a local server that needs none, any value will do)"
            )
        self._max_tokens = max_tokens
        self._stream_usage = stream_usage
        probe = first_client(self._new_client, self.name, self._secrets())
        _ = probe.chat.completions  # and loads what it loads lazily, outside the loop
        self._keep_clients(probe)

    def __repr__(self) -> str:
        where = mask(self._base_url) if self._base_url else "default endpoint"
        return f"OpenAIModel(name={self.name!r}, model={self.model!r}, base_url={where!r})"

    def _client_key(self) -> str | Callable[[], Awaitable[str]] | None:
        return self._api_key if self._key_source is None else self._current_key

    async def _current_key(self) -> str:
        """The key for one request, from ``api_key``'s function (the SDK calls it
        for every request); the last few are kept only to be scrubbed."""
        assert self._key_source is not None
        key = await self._key_source()
        if key not in self._keys_used:
            self._keys_used = [*self._keys_used[-3:], key]
        return key

    def _secrets(self) -> tuple[str | None, ...]:
        return (self._api_key, *self._keys_used)

    @property
    def base_url(self) -> str | None:
        """The endpoint, credentials masked; ``None`` for the SDK's default."""
        return mask(self._base_url) if self._base_url else None

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The request body this model sends for ``request``."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(request),
            "stream": True,
        }
        if self._stream_usage:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                }
                for t in request.tools
            ]
        if self._max_tokens is not None:
            body["max_tokens"] = self._max_tokens
        if self._temperature is not None:
            body["temperature"] = self._temperature
        return body

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        client = await self._clients.get()
        stream = await self._open(client.chat.completions.create, **self.params(request))
        failure: ModelError | None = None
        text: list[str] = []
        calls: dict[int, _PartialCall] = {}
        usage: Usage | None = None
        finish: str | None = None
        reply_id: str | None = None
        reply_model: str | None = None
        try:
            async with stream:
                async for chunk in stream:
                    reply_id = reply_id or chunk.id
                    reply_model = reply_model or chunk.model
                    if chunk.usage is not None:
                        usage = Usage(
                            input_tokens=chunk.usage.prompt_tokens or 0,
                            output_tokens=chunk.usage.completion_tokens or 0,
                        )
                    for choice in chunk.choices:
                        if choice.index != 0:
                            continue
                        delta = choice.delta
                        piece = delta.content or getattr(delta, "refusal", None)
                        if piece:
                            text.append(piece)
                            yield TextDelta(piece)
                        for tc in delta.tool_calls or ():
                            call = calls.setdefault(tc.index, _PartialCall())
                            call.add(tc.id, tc.function)
                        if choice.finish_reason:
                            finish = choice.finish_reason
        except Exception as e:
            failure = self._translate(e, streaming=True)
        if failure is not None:
            raise failure
        if finish is None:
            raise RetryableModelError(
                f"{self.name}: the stream ended before the reply was complete"
            )
        cut = finish == "length"
        tool_calls = tuple(calls[i].finish(self.name, cut=cut) for i in sorted(calls))
        extra = {k: v for k, v in (("id", reply_id), ("model", reply_model)) if v}
        yield ModelResponse(
            text="".join(text),
            tool_calls=tool_calls,
            usage=usage,
            stop_reason=finish,
            extra=extra,
        )

    def _translate(self, e: BaseException, *, streaming: bool = False) -> ModelError:
        """The one boundary where openai SDK and transport errors become ModelError."""
        sdk = self._sdk
        secrets = self._secrets()
        if isinstance(e, ModelError):
            return e
        if isinstance(e, sdk.APIStatusError):
            headers = e.response.headers
            kind, detail = provider_message(e.body, e.message)
            label = f"HTTP {e.status_code}" + (f" {kind}" if kind else "")
            return status_error(self.name, label, detail, e.status_code, headers, secrets)
        if isinstance(e, sdk.APIConnectionError):
            where = mask(self._base_url) if self._base_url else "the OpenAI API"
            return connection_error(self.name, where, e.message, secrets, streaming=streaming)
        if isinstance(e, sdk.APIError):
            # An error object inside a 200 stream.
            kind, detail = provider_message(e.body, e.message)
            code = getattr(e, "code", None)
            message = scrub(f"{self.name}: error in stream ({kind or code}): {detail}", secrets)
            fatal = kind in _FATAL_KINDS or (
                isinstance(code, int | str)
                and str(code).isdigit()
                and not should_retry_status(int(code), None)
            )
            if fatal:
                return ModelError(message, retryable=False)
            return RetryableModelError(message)
        return other_error(self.name, e, secrets)


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""

    def add(self, call_id: str | None, function: Any) -> None:
        if call_id and not self.id:
            self.id = call_id
        if function is None:
            return
        name = getattr(function, "name", None)
        if name and name != self.name:
            self.name = name if not self.name else self.name + name
        arguments = getattr(function, "arguments", None)
        if arguments:
            self.arguments += arguments

    def finish(self, model: str, *, cut: bool = False) -> ToolCall:
        if not self.name:
            raise RetryableModelError(f"{model}: a tool call in the stream had no name")
        parsed = call_input(model, self.name, self.arguments, cut=cut)
        return ToolCall(id=self.id or f"call_{uuid.uuid4().hex[:24]}", name=self.name, input=parsed)


def to_openai_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The chat-completions ``messages`` for ``request``."""
    out: list[dict[str, Any]] = []
    if request.instructions:
        out.append({"role": "system", "content": request.instructions})
    for m in request.messages:
        out.extend(_message(m))
    return out


def _message(m: Message) -> list[dict[str, Any]]:
    if m.role == "user":
        return [{"role": "user", "content": m.text}]
    if m.role == "assistant":
        if not m.text and not m.tool_calls:
            return []
        msg: dict[str, Any] = {"role": "assistant", "content": m.text or None}
        if m.tool_calls:
            msg["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.input)},
                }
                for c in m.tool_calls
            ]
        return [msg]
    content = f"Error: {m.text}" if m.is_error else m.text
    return [{"role": "tool", "tool_call_id": m.tool_call_id or "", "content": content}]
