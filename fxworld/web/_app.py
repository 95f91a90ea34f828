"""The session routes: create, prompt, and a resumable Server-Sent Events stream.

``POST /sessions``                 ``{"text", "session_id"?}`` -> 202 ``{"session_id", "cursor"}``
``POST /sessions/{id}/prompts``    ``{"text"}`` -> 202 ``{"session_id", "cursor"}``
``GET  /sessions/{id}/stream``     ``text/event-stream``
``GET  /sessions/{id}/approvals``  -> 200 ``{"approvals": [...]}``
``POST /sessions/{id}/approvals/{execution_id}`` ``{"approve": true, "note"?}`` or
                                   ``{"approve": false, "reason"?}`` -> 200
``POST /sessions/{id}/stop``       ``{"reason"?}`` -> 202

Every refusal is a JSON body ``{"error": <code>, "message": <text>}`` with its
status; an unexpected exception is logged here and answered with a bare 500, so a
client never sees a stack trace or an internal message.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from fxworld import validate
from fxworld.errors import (
    AlreadyDecided,
    BackendUnavailable,
    ConfigurationError,
    EntryTooLarge,
    InvalidArgument,
    InvalidCursor,
    InvalidEntry,
    InvalidSessionId,
    UnknownCall,
)

from . import _sse

if TYPE_CHECKING:
    from fxworld.engine import Agent, Session

__all__ = [
    "Action",
    "Authorize",
    "MAX_PROMPT_BYTES",
    "create_app",
    "routes",
    "HTTPError",
]

logger = logging.getLogger("fxworld.web")

Action = Literal["create", "prompt", "stream", "approve", "stop"]
Authorize = Callable[[Request, str, Action], "bool | Awaitable[bool]"]
"""``authorize(request, session_id, action)``: true to allow (may be async).

``action`` is ``"create"``, ``"prompt"``, ``"stream"``, ``"approve"`` (list the
calls waiting for a decision, decide one) or ``"stop"``. For ``"create"``,
``session_id`` is the id the new session will have: a random one, or the one the
client proposed in the body (so that a retried create cannot make two sessions);
refuse a proposed id that names someone else's session. Falsy answers 403;
raising :class:`HTTPError` answers with its status (e.g. 401 for a missing login).
It is asked before the session is looked up, so a refused client cannot probe
which sessions exist."""

MAX_PROMPT_BYTES = 256 * 1024
"""The default limit on a prompt request's body, in bytes."""

_MAX_KEY_CHARS = 200
_MAX_SMALL_BODY = 16 * 1024  # a decision or a stop: a note or a reason


class HTTPError(Exception):
    """A refusal with a status, a short code and a message safe to show a client."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def error_response(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status)


async def read_body(request: Request, limit: int) -> bytes | None:
    """The request's body, or ``None`` as soon as it is known to pass ``limit`` bytes
    (from its Content-Length, else while it is read)."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _translate(exc: BaseException) -> HTTPError | None:
    """Our typed errors as HTTP refusals; ``None`` for anything unexpected."""
    if isinstance(exc, HTTPError):
        return exc
    if isinstance(exc, EntryTooLarge):
        return HTTPError(413, "too_large", "the prompt is too large")
    if isinstance(exc, InvalidCursor):
        return HTTPError(400, "invalid_cursor", str(exc))
    if isinstance(exc, InvalidSessionId):
        return HTTPError(400, "invalid_session_id", str(exc))
    if isinstance(exc, (InvalidEntry, InvalidArgument)):
        return HTTPError(400, "invalid_request", str(exc))
    if isinstance(exc, UnknownCall):
        return HTTPError(404, "unknown_call", "no such call waits for a decision here")
    if isinstance(exc, AlreadyDecided):
        how = "approved" if exc.approved else "denied"
        return HTTPError(409, "already_decided", f"the call was already {how}")
    if isinstance(exc, BackendUnavailable):
        return HTTPError(503, "unavailable", "the session store is unavailable; retry")
    return None


class _Routes:
    def __init__(
        self,
        agent: Agent,
        *,
        authorize: Authorize | None,
        max_prompt_bytes: int,
        heartbeat: float,
        retry_ms: int,
    ) -> None:
        self.agent = agent
        self.authorize = authorize
        self.max_prompt_bytes = max_prompt_bytes
        self.heartbeat = heartbeat
        self.retry_ms = retry_ms
        self.closing = asyncio.Event()

    def close_streams(self) -> None:
        """End every open stream now, and every stream opened from now on, at once
        (a clean end: clients reconnect, e.g. to another instance, from their cursor)."""
        self.closing.set()

    # -- helpers ----------------------------------------------------------------

    async def _check(self, request: Request, session_id: str, action: Action) -> None:
        if self.authorize is None:  # allow_anyone=True
            return
        allowed = self.authorize(request, session_id, action)
        if inspect.isawaitable(allowed):
            allowed = await allowed
        if not allowed:
            raise HTTPError(403, "forbidden", f"not allowed to {action} this session")

    async def _existing(self, session_id: str) -> Session:
        session = self.agent.session(validate.session_id(session_id))
        if not await session.read(None, limit=1):
            raise HTTPError(404, "not_found", f"no session {session_id!r}")
        return session

    async def _prompt_body(self, request: Request) -> tuple[str, str | None, dict[str, Any]]:
        raw = await read_body(request, self.max_prompt_bytes)
        if raw is None:
            raise HTTPError(413, "too_large", f"the prompt is over {self.max_prompt_bytes} bytes")
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            raise HTTPError(400, "invalid_json", "the body is not JSON") from None
        if not isinstance(body, dict) or not isinstance(body.get("text"), str):
            raise HTTPError(400, "invalid_request", 'the body must be {"text": "<prompt>"}')
        text: str = body["text"]
        if not text.strip():
            raise HTTPError(400, "invalid_request", "the prompt text is empty")
        key = request.headers.get("idempotency-key")
        if key is not None and not (1 <= len(key) <= _MAX_KEY_CHARS and key.isprintable()):
            raise HTTPError(
                400, "invalid_request", f"Idempotency-Key must be 1..{_MAX_KEY_CHARS} characters"
            )
        return text, key, body

    async def _send(self, session: Session, text: str, key: str | None) -> JSONResponse:
        accepted = await session.prompt(text, key=key).accepted
        stream = f"sessions/{accepted.session_id}/stream"
        return JSONResponse(
            {"session_id": accepted.session_id, "cursor": accepted.cursor, "stream": stream},
            status_code=202,
        )

    # -- routes -----------------------------------------------------------------

    async def create(self, request: Request) -> Response:
        text, key, body = await self._prompt_body(request)
        # A client may choose the new session's id (so that retrying the request with
        # the same id and Idempotency-Key can never make two sessions); else a random one.
        chosen = body.get("session_id")
        if chosen is not None:
            validate.session_id(chosen)
        session = self.agent.session(chosen)
        await self._check(request, session.id, "create")
        return await self._send(session, text, key)

    async def prompt(self, request: Request) -> Response:
        session_id: str = request.path_params["session_id"]
        validate.session_id(session_id)
        await self._check(request, session_id, "prompt")
        session = await self._existing(session_id)
        text, key, _ = await self._prompt_body(request)
        return await self._send(session, text, key)

    async def stream(self, request: Request) -> Response:
        session_id: str = request.path_params["session_id"]
        validate.session_id(session_id)
        await self._check(request, session_id, "stream")
        until_arg = request.query_params.get("until")
        if until_arg not in (None, "", "turn"):
            raise HTTPError(400, "invalid_request", "until must be 'turn' or absent")
        until: Literal["turn"] | None = "turn" if until_arg == "turn" else None
        # Last-Event-ID (sent by a reconnecting EventSource) is newer than the URL's
        # ?cursor= (which the page opened the stream with), so it wins.
        cursor = request.headers.get("last-event-id") or request.query_params.get("cursor") or None
        session = await self._existing(session_id)
        await session.read(cursor, limit=1)  # InvalidCursor -> 400, before any byte is sent
        frames = _sse.heartbeats(
            self._frames(session, cursor, until), every=self.heartbeat, stop=self.closing
        )
        return StreamingResponse(
            frames,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"},
        )

    # -- approvals and stop -------------------------------------------------------

    async def _small_body(self, request: Request) -> dict[str, Any]:
        """A small JSON object body (an empty body is ``{}``)."""
        raw = await read_body(request, _MAX_SMALL_BODY)
        if raw is None:
            raise HTTPError(413, "too_large", f"the body is over {_MAX_SMALL_BODY} bytes")
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            raise HTTPError(400, "invalid_json", "the body is not JSON") from None
        if not isinstance(body, dict):
            raise HTTPError(400, "invalid_request", "the body must be a JSON object")
        for name in ("note", "reason"):
            if body.get(name) is not None and not isinstance(body[name], str):
                raise HTTPError(400, "invalid_request", f"{name} must be a string")
        return body

    async def approvals(self, request: Request) -> Response:
        session_id: str = request.path_params["session_id"]
        validate.session_id(session_id)
        await self._check(request, session_id, "approve")
        session = await self._existing(session_id)
        waiting = [
            {
                "execution_id": a.execution_id,
                "call_id": a.call_id,
                "name": a.name,
                "input": a.input,
                "requested_at": a.requested_at.isoformat(),
                "expires_at": None if a.expires_at is None else a.expires_at.isoformat(),
            }
            for a in await session.pending_approvals()
        ]
        return JSONResponse({"approvals": waiting})

    async def decide(self, request: Request) -> Response:
        session_id: str = request.path_params["session_id"]
        execution_id: str = request.path_params["execution_id"]
        validate.session_id(session_id)
        await self._check(request, session_id, "approve")
        session = await self._existing(session_id)
        body = await self._small_body(request)
        approve = body.get("approve")
        if not isinstance(approve, bool):
            raise HTTPError(400, "invalid_request", 'the body must be {"approve": true|false, ...}')
        if approve:
            await session.approve(execution_id, note=body.get("note"))
        else:
            await session.deny(execution_id, reason=body.get("reason"))
        return JSONResponse({"execution_id": execution_id, "approved": approve})

    async def stop(self, request: Request) -> Response:
        session_id: str = request.path_params["session_id"]
        validate.session_id(session_id)
        await self._check(request, session_id, "stop")
        session = await self._existing(session_id)
        body = await self._small_body(request)
        await session.stop(reason=body.get("reason"))
        return JSONResponse({"session_id": session_id}, status_code=202)

    async def _frames(
        self, session: Session, cursor: str | None, until: Literal["turn"] | None
    ) -> AsyncIterator[bytes]:
        yield _sse.retry(self.retry_ms)
        events = session.stream(cursor, until=until)
        try:
            async for event in events:
                yield _sse.frame(event.cursor, event.kind, event.data)
        except Exception:
            # The response has started: end it. The client reconnects from the last
            # cursor it received; it never sees what went wrong here.
            logger.exception("stream of session %r failed", session.id)
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()


def routes(
    agent: Agent,
    *,
    authorize: Authorize | None = None,
    allow_anyone: bool = False,
    max_prompt_bytes: int = MAX_PROMPT_BYTES,
    heartbeat: float = _sse.HEARTBEAT,
    retry_ms: int = _sse.RETRY_MS,
) -> list[BaseRoute]:
    """The session routes, to add to a Starlette or FastAPI app's routes (or mount
    :func:`create_app`'s app). Each route answers its own errors.

    Without ``authorize`` they refuse to be built unless ``allow_anyone=True``:
    serving sessions to anyone must be a decision, not a default.
    """
    built, _ = _build(
        agent,
        authorize=authorize,
        allow_anyone=allow_anyone,
        max_prompt_bytes=max_prompt_bytes,
        heartbeat=heartbeat,
        retry_ms=retry_ms,
    )
    return built


def _build(
    agent: Agent,
    *,
    authorize: Authorize | None,
    allow_anyone: bool,
    max_prompt_bytes: int,
    heartbeat: float,
    retry_ms: int,
) -> tuple[list[BaseRoute], _Routes]:
    if authorize is None and not allow_anyone:
        raise ConfigurationError(
            "the session routes need authorize=callable(request, session_id, action), "
            "or allow_anyone=True to serve every session to anyone who asks"
        )
    if authorize is not None and not callable(authorize):
        raise ConfigurationError("authorize must be callable(request, session_id, action)")
    if not isinstance(max_prompt_bytes, int) or max_prompt_bytes < 1:
        raise ConfigurationError("max_prompt_bytes must be a positive integer")
    if not heartbeat > 0:
        raise ConfigurationError("heartbeat must be a positive number of seconds")
    r = _Routes(
        agent,
        authorize=authorize,
        max_prompt_bytes=max_prompt_bytes,
        heartbeat=heartbeat,
        retry_ms=retry_ms,
    )
    built: list[BaseRoute] = [
        Route("/sessions", _guard(r.create), methods=["POST"]),
        Route("/sessions/{session_id}/prompts", _guard(r.prompt), methods=["POST"]),
        Route("/sessions/{session_id}/stream", _guard(r.stream), methods=["GET"]),
        Route("/sessions/{session_id}/approvals", _guard(r.approvals), methods=["GET"]),
        Route(
            "/sessions/{session_id}/approvals/{execution_id}",
            _guard(r.decide),
            methods=["POST"],
        ),
        Route("/sessions/{session_id}/stop", _guard(r.stop), methods=["POST"]),
    ]
    return built, r


def _guard(
    endpoint: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """Answer every exception of ``endpoint`` here, as a JSON refusal or a bare 500,
    so that a route works the same mounted in any app, whatever its handlers."""

    async def guarded(request: Request) -> Response:
        try:
            return await endpoint(request)
        except Exception as exc:
            return await _handle_error(request, exc)

    guarded.__name__ = getattr(endpoint, "__name__", "endpoint")
    return guarded


async def _handle_error(request: Request, exc: Exception) -> Response:
    mapped = _translate(exc)
    if mapped is not None:
        return error_response(mapped.status, mapped.code, mapped.message)
    logger.exception("%s %s failed", request.method, request.url.path)
    return error_response(500, "internal", "internal server error")


async def _not_found(request: Request, exc: Exception) -> Response:
    return error_response(404, "not_found", "no such route")


async def _method_not_allowed(request: Request, exc: Exception) -> Response:
    return error_response(405, "method_not_allowed", "method not allowed")


def exception_handlers() -> dict[Any, Callable[[Request, Exception], Awaitable[Response]]]:
    """The handlers that map fxworld's errors to statuses, and everything else to a
    bare 500 (logged, never sent)."""
    return {404: _not_found, 405: _method_not_allowed, Exception: _handle_error}


def create_app(
    agent: Agent,
    *,
    authorize: Authorize | None = None,
    allow_anyone: bool = False,
    max_prompt_bytes: int = MAX_PROMPT_BYTES,
    heartbeat: float = _sse.HEARTBEAT,
    retry_ms: int = _sse.RETRY_MS,
    extra_routes: list[BaseRoute] | None = None,
) -> Starlette:
    """An ASGI app serving ``agent``'s sessions; mount it anywhere::

        app = FastAPI()
        app.mount("/agent", create_app(agent, authorize=can_access))

    See :func:`routes` for ``authorize`` and ``allow_anyone``. ``heartbeat`` is
    the seconds of silence after which a stream sends a comment (15 by default).
    """
    built, r = _build(
        agent,
        authorize=authorize,
        allow_anyone=allow_anyone,
        max_prompt_bytes=max_prompt_bytes,
        heartbeat=heartbeat,
        retry_ms=retry_ms,
    )
    app = Starlette(
        routes=built + list(extra_routes or []),
        exception_handlers=exception_handlers(),
    )
    # app.state.close_streams(): end every open stream at once, e.g. before a
    # graceful shutdown, so clients reconnect (elsewhere) instead of holding it up.
    app.state.close_streams = r.close_streams
    return app
