"""A local HTTP server that speaks the providers' real streaming wire formats.

Real sockets on 127.0.0.1 (aiohttp on its own event loop in a thread, so a test
may block or run subprocesses while it serves). Tests queue replies; each POST to
``/v1/chat/completions`` (OpenAI) or ``/v1/messages`` (Anthropic) takes the next
one and is recorded (path, headers, JSON body) for the test to inspect.

Wire formats, as the providers send them:
- OpenAI: ``data: {chat.completion.chunk}`` lines, ``tool_calls`` deltas by
  ``index`` (id and name in the first delta, ``arguments`` in pieces), a final
  usage chunk with empty ``choices``, then ``data: [DONE]``.
- Anthropic: ``event: <type>`` + ``data: {...}`` frames: ``message_start``,
  ``content_block_start`` / ``content_block_delta`` (``text_delta``,
  ``input_json_delta``) / ``content_block_stop``, ``message_delta``,
  ``message_stop``, with ``ping`` frames in between.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = [
    "ProviderServer",
    "Sse",
    "Status",
    "Recorded",
    "openai_stream",
    "anthropic_stream",
    "openai_error",
    "anthropic_error",
]


@dataclass
class Sse:
    """A 200 event stream: ``frames`` written one by one, ``delay`` seconds apart.

    ``abort=True`` drops the connection after the last frame instead of ending
    the body properly (a cut connection). ``hold`` frames are written, then the
    server waits ``hold_for`` seconds before the rest (a slow model)."""

    frames: Sequence[str]
    delay: float = 0.0
    abort: bool = False
    hold: int | None = None
    hold_for: float = 0.0


@dataclass
class Status:
    """A plain HTTP error (or any non-streaming) response."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


Reply = Sse | Status


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class ProviderServer:
    """Start with :meth:`start` (or as a context manager); ``url`` is its base."""

    def __init__(self, *, api_key: str | None = None) -> None:
        self.api_key = api_key
        self.requests: list[Recorded] = []
        self._replies: list[Reply] = []
        self._script: list[list[Reply]] | None = None
        self._asked: dict[int, int] = {}
        self.disconnects = 0
        """Streams the client closed before their end."""
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def queue(self, *replies: Reply) -> None:
        """Replies for the next requests, in order."""
        with self._lock:
            self._replies.extend(replies)

    def script(self, *replies: Reply | Sequence[Reply]) -> None:
        """Reply by the conversation instead, like ``ScriptedModel``: a request with
        n assistant messages gets ``replies[n]``, so a call made again (after a
        crash or a takeover) gets the same reply. An entry that is a sequence gives
        successive replies to successive asks at that n (its last one repeats)."""
        with self._lock:
            self._script = [list(r) if isinstance(r, list | tuple) else [r] for r in replies]
            self._asked = {}

    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    def start(self) -> ProviderServer:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._serve())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="provider-server", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("provider server did not start")
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        loop = self._loop
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(30)
        loop.close()
        self._loop = None

    def __enter__(self) -> ProviderServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_post("/v1/messages", self._anthropic)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or ()
        assert sockets, "the server did not bind"
        self.port = int(sockets[0].getsockname()[1])

    async def _take(self, request: web.Request) -> Reply | None:
        body = await request.json()
        with self._lock:
            self.requests.append(Recorded(request.path, dict(request.headers), body))
            if self._script is not None:
                n = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
                if n >= len(self._script):
                    return None
                asked = self._asked.get(n, 0)
                self._asked[n] = asked + 1
                options = self._script[n]
                return options[min(asked, len(options) - 1)]
            return self._replies.pop(0) if self._replies else None

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        reply = await self._take(request)
        if self.api_key is not None:
            given = request.headers.get("Authorization", "")
            if given != f"Bearer {self.api_key}":
                shown = given.removeprefix("Bearer ")
                return web.json_response(
                    openai_error(
                        f"Incorrect API key provided: {shown}.",
                        "invalid_request_error",
                        "invalid_api_key",
                    ),
                    status=401,
                )
        return await self._send(request, reply)

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        reply = await self._take(request)
        if self.api_key is not None:
            # x-api-key, or (as newer SDKs send it) a bearer token
            given = request.headers.get("x-api-key") or request.headers.get(
                "Authorization", ""
            ).removeprefix("Bearer ")
            if given != self.api_key:
                return web.json_response(
                    anthropic_error("authentication_error", f"invalid x-api-key: {given}"),
                    status=401,
                )
        return await self._send(request, reply)

    async def _send(self, request: web.Request, reply: Reply | None) -> web.StreamResponse:
        if reply is None:
            return web.json_response(
                openai_error("no reply queued in the test server", "server_error"), status=418
            )
        if isinstance(reply, Status):
            if isinstance(reply.body, str):
                return web.Response(status=reply.status, text=reply.body, headers=reply.headers)
            return web.json_response(reply.body, status=reply.status, headers=reply.headers)
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        for i, frame in enumerate(reply.frames):
            if i and reply.delay:
                await asyncio.sleep(reply.delay)
            if reply.hold is not None and i == reply.hold:
                await asyncio.sleep(reply.hold_for)
            if request.transport is None or request.transport.is_closing():
                self.disconnects += 1  # the client went away (a consumer stopped, a kill)
                return response
            try:
                await response.write(frame.encode())
            except (ConnectionResetError, RuntimeError):
                self.disconnects += 1
                return response
        if reply.abort:
            transport = request.transport
            if transport is not None:
                transport.abort()
            return response
        await response.write_eof()
        return response


# -- OpenAI wire format ------------------------------------------------------------


def openai_error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _chunk(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> str:
    data = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "system_fingerprint": "fp_test",
        "choices": choices,
        "usage": usage,
    }
    return f"data: {json.dumps(data)}\n\n"


def openai_stream(
    text: Sequence[str] = (),
    *,
    calls: Sequence[tuple[str, str, Sequence[str]]] = (),
    interleave: bool = True,
    finish: str | None = None,
    usage: tuple[int, int] | None = (11, 7),
    done: bool = True,
) -> list[str]:
    """Frames of one streamed chat completion: ``text`` pieces, then tool
    ``calls`` given as ``(id, name, argument pieces)``; with ``interleave`` the
    argument pieces of parallel calls alternate, as real servers send them."""
    frames = [_chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}}])]
    for piece in text:
        frames.append(_chunk([{"index": 0, "delta": {"content": piece}}]))
    for i, (call_id, name, _) in enumerate(calls):
        head = {
            "index": i,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        frames.append(_chunk([{"index": 0, "delta": {"tool_calls": [head]}}]))
    pieces: list[tuple[int, str]] = []
    if interleave:
        longest = max((len(c[2]) for c in calls), default=0)
        for j in range(longest):
            pieces += [(i, c[2][j]) for i, c in enumerate(calls) if j < len(c[2])]
    else:
        pieces = [(i, p) for i, c in enumerate(calls) for p in c[2]]
    for i, piece in pieces:
        frames.append(
            _chunk(
                [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": i, "function": {"arguments": piece}}]},
                    }
                ]
            )
        )
    reason = finish or ("tool_calls" if calls else "stop")
    frames.append(_chunk([{"index": 0, "delta": {}, "finish_reason": reason}]))
    if usage is not None:
        frames.append(
            _chunk(
                [],
                {
                    "prompt_tokens": usage[0],
                    "completion_tokens": usage[1],
                    "total_tokens": sum(usage),
                },
            )
        )
    if done:
        frames.append("data: [DONE]\n\n")
    return frames


# -- Anthropic wire format ---------------------------------------------------------


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _event(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"


def anthropic_stream(
    text: Sequence[str] = (),
    *,
    calls: Sequence[tuple[str, str, Sequence[str]]] = (),
    stop_reason: str | None = None,
    usage: tuple[int, int] = (25, 9),
    stop: bool = True,
) -> list[str]:
    """Frames of one streamed message: a text block with ``text`` pieces, then one
    ``tool_use`` block per call ``(id, name, partial_json pieces)``."""
    frames = [
        _event(
            "message_start",
            {
                "message": {
                    "id": "msg_test",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-test",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": usage[0],
                        "output_tokens": 1,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                    },
                }
            },
        ),
        _event("ping", {}),
    ]
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    if text:
        deltas = [{"type": "text_delta", "text": piece} for piece in text]
        blocks.append(({"type": "text", "text": ""}, deltas))
    for call_id, name, pieces in calls:
        start = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        blocks.append((start, [{"type": "input_json_delta", "partial_json": p} for p in pieces]))
    for index, (start, deltas) in enumerate(blocks):
        frames.append(_event("content_block_start", {"index": index, "content_block": start}))
        frames.extend(_event("content_block_delta", {"index": index, "delta": d}) for d in deltas)
        frames.append(_event("content_block_stop", {"index": index}))
    reason = stop_reason or ("tool_use" if calls else "end_turn")
    frames.append(
        _event(
            "message_delta",
            {
                "delta": {"stop_reason": reason, "stop_sequence": None},
                "usage": {"output_tokens": usage[1]},
            },
        )
    )
    if stop:
        frames.append(_event("message_stop", {}))
    return frames


def anthropic_error_event(kind: str, message: str) -> str:
    return f"event: error\ndata: {json.dumps(anthropic_error(kind, message))}\n\n"
