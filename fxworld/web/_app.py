"""The session routes: create, prompt, and a resumable Server-Sent Events stream.

``POST /sessions``                 ``{"text", "session_id"?, "context"?}`` -> 202
                                   ``{"session_id", "cursor"}``
``POST /sessions/{id}/prompts``    ``{"text"}`` -> 202 ``{"session_id", "cursor"}``
``GET  /sessions/{id}/stream``     ``text/event-stream``
``GET  /sessions/{id}/approvals``  -> 200 ``{"approvals": [...]}``
``POST /sessions/{id}/approvals/{execution_id}`` ``{"approve": true, "note"?}`` or
                                   ``{"approve": false, "reason"?}`` -> 200
``POST /sessions/{id}/stop``       ``{"reason"?}`` (or empty, still sent as JSON) -> 202
``POST /sessions/{id}/fork``       ``{"at"?: cursor, "session_id"?: new id}`` (or empty) -> 201
                                   ``{"session_id", "source", "stream"}``

A 202 for a prompt also carries ``stream``: the stream route's path from the
server's root, with the mount's ``root_path`` (``/agent/sessions/{id}/stream``
when mounted at ``/agent``). The approval list passes through ``visible`` as each
call's ``approval.requested`` event, like the stream.

Every refusal is a JSON body ``{"error": <code>, "message": <text>}`` with its
status; an unexpected exception is logged here and answered with a bare 500, so a
client never sees a stack trace or an internal message.

Every route starts with :meth:`_Routes._check` (the ``Origin`` check, JSON-only
``POST``, then ``authorize``, before any byte of the body is read; the routes of
one session through :meth:`_Routes._allowed` and :meth:`_Routes._session`, which
check the session id first and look the session up after) and reads its body
with :meth:`_Routes._json_body` (a strict ``Content-Length``, a byte limit):
routes added here get the same protection by calling them.

A new session's context comes from the server's own ``context(request)`` hook
(e.g. the tenant of the authenticated user); a body's ``"context"`` is refused
unless the app sets ``client_context=True``. An ``authorize`` that takes a
``context`` keyword receives it: the new session's on ``"create"``, the saved one
of the session otherwise (``None``: it has none, or no such session).

The options of :func:`routes` and :func:`create_app` are one frozen
:class:`RouteOptions`, checked once when it is made and passed whole.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack, cast

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from fxworld import validate
from fxworld.engine import log
from fxworld.engine.session import StreamEvent
from fxworld.errors import (
    AlreadyDecided,
    ApprovalExpired,
    BackendUnavailable,
    ConfigurationError,
    Conflict,
    ContextMismatch,
    EntryTooLarge,
    InvalidArgument,
    InvalidCursor,
    InvalidEntry,
    InvalidSessionId,
    KeyReused,
    UnknownCall,
    UnknownSession,
)

from . import _sse

if TYPE_CHECKING:
    from fxworld.engine import Agent, Session

__all__ = [
    "Action",
    "Authorize",
    "ContextHook",
    "MAX_PROMPT_BYTES",
    "RouteOptions",
    "RouteOptionArgs",
    "STREAM_LIFETIME",
    "Visible",
    "create_app",
    "routes",
    "HTTPError",
    "check_request",
    "ask_authorize",
    "guard",
    "handle_error",
    "small_body",
]

logger = logging.getLogger("fxworld.web")

Action = Literal["create", "prompt", "stream", "approve", "stop", "fork"]
Authorize = Callable[[Request, str, Action], "bool | Awaitable[bool]"]
"""``authorize(request, session_id, action)``: ``True`` to allow (may be async).

Only ``True`` allows. ``False`` answers 403; any other answer (``None``, a
string, a ``Response``, a function that was not called) is a configuration
error: logged, answered 500, never a grant. Raising :class:`HTTPError` (or a
Starlette/FastAPI ``HTTPException``) answers with its status (e.g. 401 for a
missing login).

``action`` is ``"create"``, ``"prompt"``, ``"stream"``, ``"approve"`` (list the
calls waiting for a decision, decide one), ``"stop"`` or ``"fork"`` (asked with the
source's id, then again with the fork's id when the body proposes one). It is asked before the
body is read and before the session is looked up, so a refused client cannot
probe which sessions exist. For ``"create"``, ``session_id`` is first the random
id the new session will have; when the body proposes an id (so that a retried
create cannot make two sessions), it is asked again with that id: refuse one that
names someone else's session (creating never writes into an existing session: it
answers 409).

An ``authorize`` with a ``context`` keyword parameter (``authorize(request,
session_id, action, *, context)``) is also given the session's context: on
``"create"`` the one the new session will be saved with, otherwise the one it was
saved with (``None``: it has none, or there is no such session), read only for
such an ``authorize``."""

ContextHook = Callable[[Request], Any]
"""``context(request)``: the context of the session this request creates, derived
from the request by the server (e.g. from its login): a dict or a Pydantic model,
or ``None`` for none (may be async)."""

Visible = Callable[[Request, "StreamEvent"], "StreamEvent | Awaitable[StreamEvent | None] | None"]
"""``visible(request, event)``: the event as this client may see it (a changed
``kind`` or ``data``; its cursor is kept), or ``None`` to leave it out of the
stream (may be async)."""

STREAM_LIFETIME = 300.0
"""Seconds after which a stream ends cleanly (the default): the client reconnects
from its last cursor (a browser's ``EventSource`` by itself), and ``authorize``
is asked again, so a revoked access stops within this time."""

MAX_PROMPT_BYTES = 256 * 1024
"""The default limit on a prompt request's body, in bytes."""

_MAX_KEY_CHARS = 200
_MAX_SMALL_BODY = 16 * 1024  # a decision or a stop: a note or a reason


class HTTPError(Exception):
    """A refusal with a status (400..599), a short code and a message safe to show
    a client; ``headers`` go with the answer (e.g. ``WWW-Authenticate``)."""

    def __init__(
        self, status: int, code: str, message: str, *, headers: Mapping[str, str] | None = None
    ) -> None:
        if not (isinstance(status, int) and 400 <= status <= 599):
            raise InvalidArgument(f"HTTPError status must be 400..599, not {status!r}")
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})


def error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status, headers=headers)


_MAX_LENGTH_DIGITS = 18


def content_length(request: Request) -> int | None:
    """The request's Content-Length (``None`` without one); 400 unless every
    Content-Length header is the same run of ASCII digits."""
    values = {v.strip() for v in request.headers.getlist("content-length")}
    if not values:
        return None
    (value,) = values if len(values) == 1 else ("",)
    if not (value.isascii() and value.isdigit() and len(value) <= _MAX_LENGTH_DIGITS):
        raise HTTPError(400, "invalid_request", "the Content-Length header is not a length")
    return int(value)


async def read_body(request: Request, limit: int) -> bytes | None:
    """The request's body, or ``None`` as soon as it is known to pass ``limit`` bytes
    (from its Content-Length, else while it is read). A malformed Content-Length
    raises :class:`HTTPError` (400)."""
    length = content_length(request)
    if length is not None and length > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def check_request(request: Request, allowed_origins: Collection[str] | None) -> None:
    """Refuse the request unless its ``Origin`` is one of ``allowed_origins``
    (``None``: any) and a ``POST`` says its body is JSON, so a cross-site page
    cannot send it without a CORS preflight. Reads no byte of the body."""
    origin = request.headers.get("origin")
    if allowed_origins is not None and origin is not None:
        if origin not in allowed_origins:
            raise HTTPError(403, "forbidden_origin", f"requests from {origin!r} are refused")
    if request.method == "POST":
        # Also for an empty body: a cross-site page sends a POST with no
        # Content-Type (fetch without a body, sendBeacon) without a preflight.
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            raise HTTPError(
                415,
                "unsupported_media_type",
                "send the body as Content-Type: application/json (an empty body too)",
            )


def takes_context(authorize: Callable[..., Any] | None) -> bool:
    """Whether ``authorize`` has a ``context`` keyword parameter (or ``**kwargs``)."""
    if authorize is None:
        return False
    try:
        params = inspect.signature(authorize).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind is p.VAR_KEYWORD
        or (p.name == "context" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        for p in params
    )


async def ask_authorize(
    authorize: Callable[..., Any] | None,
    request: Request,
    session_id: str,
    action: str,
    context: Callable[[], Awaitable[Any]] | None = None,
) -> None:
    """Refuse the request unless ``authorize(request, session_id, action)`` answers
    ``True`` (``None``: no authorize, everyone is allowed). ``False`` is 403; any
    other answer is a configuration error: logged, 500, never a grant. An
    ``authorize`` that takes ``context`` (:func:`takes_context`) is also given
    ``context=await context()``."""
    if authorize is None:  # allow_anyone=True
        return
    allowed: Any
    if context is not None and takes_context(authorize):
        allowed = authorize(request, session_id, action, context=await context())
    else:
        allowed = authorize(request, session_id, action)
    if inspect.isawaitable(allowed):
        allowed = await allowed
    if allowed is True:
        return
    if allowed is False:
        raise HTTPError(403, "forbidden", f"not allowed to {action} this session")
    if inspect.iscoroutine(allowed):
        allowed.close()  # never run: no "was never awaited" warning on top
    logger.error(
        "authorize returned %s, not True or False: refusing %s %s (a configuration error)",
        type(allowed).__name__,
        request.method,
        request.url.path,
    )
    raise HTTPError(500, "internal", "internal server error")


async def small_body(request: Request) -> dict[str, Any]:
    """A small JSON object body (an empty body is ``{}``): a decision or a stop,
    whose ``note`` and ``reason`` must be strings."""
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


def _translate(exc: BaseException) -> HTTPError | None:
    """Our typed errors as HTTP refusals; ``None`` for anything unexpected."""
    if isinstance(exc, HTTPError):
        return exc
    if isinstance(exc, HTTPException):  # Starlette's or FastAPI's, e.g. from authorize
        status = exc.status_code if 400 <= exc.status_code <= 599 else 500
        return HTTPError(
            status, _STATUS_CODES.get(status, "error"), str(exc.detail), headers=exc.headers
        )
    if isinstance(exc, KeyReused):
        return HTTPError(
            409, "key_reused", "this Idempotency-Key was already used for another request"
        )
    if isinstance(exc, ContextMismatch):
        return HTTPError(409, "context_mismatch", "the session was created with another context")
    if isinstance(exc, Conflict):  # only create appends with expect=
        return HTTPError(409, "session_exists", "a session with this id already exists")
    if isinstance(exc, EntryTooLarge):
        return HTTPError(413, "too_large", f"the prompt is too large to save: {exc}")
    if isinstance(exc, InvalidCursor):
        return HTTPError(400, "invalid_cursor", str(exc))
    if isinstance(exc, InvalidSessionId):
        return HTTPError(400, "invalid_session_id", str(exc))
    if isinstance(exc, (InvalidEntry, InvalidArgument)):
        return HTTPError(400, "invalid_request", str(exc))
    if isinstance(exc, UnknownSession):
        return HTTPError(404, "not_found", str(exc))
    if isinstance(exc, UnknownCall):
        return HTTPError(404, "unknown_call", "no such call waits for a decision here")
    if isinstance(exc, ApprovalExpired):  # an AlreadyDecided: first
        return HTTPError(
            409, "approval_expired", "the call's approval timeout passed: it was denied"
        )
    if isinstance(exc, AlreadyDecided):
        how = "approved" if exc.approved else "denied"
        return HTTPError(409, "already_decided", f"the call was already {how}")
    if isinstance(exc, BackendUnavailable):
        return HTTPError(
            503,
            "unavailable",
            "the session store is unavailable; retry",
            headers={"Retry-After": str(RETRY_AFTER)},
        )
    return None


RETRY_AFTER = 2
"""The seconds a 503 (the session store is unavailable) asks a client to wait."""

_STATUS_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    429: "too_many_requests",
    503: "unavailable",
}


@dataclass(frozen=True)
class RouteOptions:
    """The options of the session routes (:func:`routes`, :func:`create_app`),
    checked when made (``ConfigurationError``) and passed whole."""

    authorize: Authorize | None = None
    """``authorize(request, session_id, action)``: see :data:`Authorize`."""
    allow_anyone: bool = False
    """Without ``authorize``, the routes refuse to be built unless this is ``True``:
    serving sessions to anyone must be a decision, not a default."""
    max_prompt_bytes: int = MAX_PROMPT_BYTES
    """The limit on a prompt request's body, in bytes (else 413)."""
    heartbeat: float = _sse.HEARTBEAT
    """The seconds of silence after which a stream sends a comment."""
    retry_ms: int = _sse.RETRY_MS
    """The reconnection delay a stream tells the client (its ``retry:`` field)."""
    allowed_origins: Collection[str] | None = None
    """The origins (``"https://app.example"``) a request with an ``Origin`` header
    may come from (others: 403); ``None`` checks none. Kept as a frozenset."""
    visible: Visible | None = None
    """``visible(request, event)``: see :data:`Visible`."""
    stream_lifetime: float = STREAM_LIFETIME
    """See :data:`STREAM_LIFETIME`."""
    context: ContextHook | None = None
    """``context(request)``: see :data:`ContextHook`. Only the server sets a
    session's context: without ``client_context``, a body that names one is 400."""
    client_context: bool = False
    """Let a create's body give the new session's context (``"context"``): for an
    app whose clients are trusted with it. Not with a ``context`` hook."""

    def __post_init__(self) -> None:
        if self.authorize is None and not self.allow_anyone:
            raise ConfigurationError(
                "the session routes need authorize=callable(request, session_id, action), "
                "or allow_anyone=True to serve every session to anyone who asks"
            )
        if self.authorize is not None and not callable(self.authorize):
            raise ConfigurationError("authorize must be callable(request, session_id, action)")
        if self.context is not None and not callable(self.context):
            raise ConfigurationError("context must be callable(request)")
        if self.context is not None and self.client_context:
            raise ConfigurationError("give context=hook or client_context=True, not both")
        if self.visible is not None and not callable(self.visible):
            raise ConfigurationError("visible must be callable(request, event)")
        if isinstance(self.allowed_origins, str):
            raise ConfigurationError('allowed_origins is a collection: ["https://app.example"]')
        if not isinstance(self.max_prompt_bytes, int) or self.max_prompt_bytes < 1:
            raise ConfigurationError("max_prompt_bytes must be a positive integer")
        if not self.heartbeat > 0:
            raise ConfigurationError("heartbeat must be a positive number of seconds")
        if not self.stream_lifetime > 0:
            raise ConfigurationError("stream_lifetime must be a positive number of seconds")
        if self.allowed_origins is not None:
            object.__setattr__(self, "allowed_origins", frozenset(self.allowed_origins))


class RouteOptionArgs(TypedDict, total=False):
    """:class:`RouteOptions`' fields as the keyword arguments of :func:`routes` and
    :func:`create_app` (documented there)."""

    authorize: Authorize | None
    allow_anyone: bool
    max_prompt_bytes: int
    heartbeat: float
    retry_ms: int
    allowed_origins: Collection[str] | None
    visible: Visible | None
    stream_lifetime: float
    context: ContextHook | None
    client_context: bool


class _Routes:
    def __init__(self, agent: Agent, options: RouteOptions) -> None:
        self.agent = agent
        self.options = options
        self.closing = asyncio.Event()

    def close_streams(self) -> None:
        """End every open stream now, and every stream opened from now on, at once
        (a clean end: clients reconnect, e.g. to another instance, from their cursor)."""
        self.closing.set()

    # -- helpers every route uses ---------------------------------------------------

    async def _check(
        self, request: Request, session_id: str, action: str, *, new: Any = None
    ) -> None:
        """Refuse the request unless :func:`check_request` passes and ``authorize``
        answers ``True`` (:func:`ask_authorize`). Reads no byte of the body. Its
        ``context``: on ``"create"``, ``new`` (the new session's); otherwise the
        session's saved one."""

        async def context() -> Any:
            if action == "create":
                return new
            return await self.agent.session(session_id).saved_context()

        check_request(request, self.options.allowed_origins)
        await ask_authorize(self.options.authorize, request, session_id, action, context)

    async def _new_context(self, request: Request) -> Any:
        """The context the server's ``context`` hook derives from ``request``, if any."""
        hook = self.options.context
        if hook is None:
            return None
        made = hook(request)
        return await made if inspect.isawaitable(made) else made

    async def _shown(self, request: Request, event: StreamEvent) -> StreamEvent | None:
        """``event`` as ``visible`` lets this client see it (``None``: not at all)."""
        visible = self.options.visible
        if visible is None:
            return event
        shown: Any = visible(request, event)
        if inspect.isawaitable(shown):
            shown = await shown
        return cast("StreamEvent | None", shown)

    async def _json_body(self, request: Request) -> dict[str, Any]:
        """The body as a JSON object, within ``max_prompt_bytes`` (else 413)."""
        limit = self.options.max_prompt_bytes
        raw = await read_body(request, limit)
        if raw is None:
            raise HTTPError(413, "too_large", f"the body is over {limit} bytes")
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            raise HTTPError(400, "invalid_json", "the body is not JSON") from None
        if not isinstance(body, dict):
            raise HTTPError(400, "invalid_request", "the body must be a JSON object")
        return body

    async def _allowed(self, request: Request, action: Action) -> str:
        """The path's session id, checked (400), then :meth:`_check` for ``action``."""
        session_id: str = validate.session_id(request.path_params["session_id"])
        await self._check(request, session_id, action)
        return session_id

    async def _session(self, request: Request, action: Action) -> Session:
        """:meth:`_allowed`, then the path's session, which must exist (404)."""
        return await self._existing(await self._allowed(request, action))

    async def _existing(self, session_id: str) -> Session:
        session = self.agent.session(validate.session_id(session_id))
        if not await session.read(None, limit=1):
            raise HTTPError(404, "not_found", f"no session {session_id!r}")
        return session

    async def _prompt_body(self, request: Request) -> tuple[str, str | None, dict[str, Any]]:
        body = await self._json_body(request)
        if not isinstance(body.get("text"), str):
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

    async def _send(
        self, request: Request, session: Session, text: str, key: str | None
    ) -> JSONResponse:
        accepted = await session.prompt(text, key=key).accepted  # KeyReused -> 409
        return self._accepted(request, accepted.session_id, accepted.cursor)

    @staticmethod
    def _accepted(request: Request, session_id: str, cursor: str) -> JSONResponse:
        """202, with the stream's path from the server's root (the ASGI
        ``root_path`` is where these routes are mounted)."""
        root = str(request.scope.get("root_path", "")).rstrip("/")
        stream = f"{root}/sessions/{session_id}/stream"
        return JSONResponse(
            {"session_id": session_id, "cursor": cursor, "stream": stream}, status_code=202
        )

    # -- routes -----------------------------------------------------------------

    async def create(self, request: Request) -> Response:
        # Only the server's hook sets the context, unless the app lets the body give it.
        context = await self._new_context(request)
        session = self.agent.session(context=context)  # a random id, unless the body
        await self._check(request, session.id, "create", new=session.context)  # names one
        text, key, body = await self._prompt_body(request)
        if body.get("context") is not None:
            if not self.options.client_context:
                raise HTTPError(
                    400, "invalid_request", "a session's context is set by the server, not the body"
                )
            session = self.agent.session(session.id, context=body["context"])  # 400 if invalid
            await self._check(request, session.id, "create", new=session.context)
        # A client may choose the new session's id (so that retrying the request with
        # the same id and Idempotency-Key can never make two sessions).
        chosen = body.get("session_id")
        if chosen is not None:
            session = self.agent.session(validate.session_id(chosen), context=session.context)
            await self._check(request, session.id, "create", new=session.context)
        # Only as the first entry of an empty log: an existing session answers 409,
        # unless this is the request that created it, repeated (same key and text).
        accepted = await session.create(text, key=key)
        return self._accepted(request, session.id, accepted.cursor)

    async def prompt(self, request: Request) -> Response:
        session = await self._session(request, "prompt")
        text, key, _ = await self._prompt_body(request)
        return await self._send(request, session, text, key)

    async def stream(self, request: Request) -> Response:
        session_id = await self._allowed(request, "stream")
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
            self._frames(request, session, cursor, until),
            every=self.options.heartbeat,
            stop=self.closing,
            lifetime=self.options.stream_lifetime,
        )
        return _sse.response(frames)

    # -- approvals and stop -------------------------------------------------------

    async def approvals(self, request: Request) -> Response:
        session = await self._session(request, "approve")
        waiting = []
        for a in await session.pending_approvals():
            # as the stream shows the call's approval.requested event, or not at all
            event = StreamEvent(a.cursor, log.APPROVAL_REQUESTED, a.event_data())
            shown = await self._shown(request, event)
            if shown is None:
                continue
            waiting.append(
                {
                    "execution_id": a.execution_id,
                    "call_id": a.call_id,
                    "name": shown.data.get("name"),
                    "input": shown.data.get("input"),
                    "requested_at": a.requested_at.isoformat(),
                    "expires_at": None if a.expires_at is None else a.expires_at.isoformat(),
                }
            )
        return JSONResponse({"approvals": waiting})

    async def decide(self, request: Request) -> Response:
        execution_id: str = request.path_params["execution_id"]
        session = await self._session(request, "approve")
        body = await small_body(request)
        approve = body.get("approve")
        if not isinstance(approve, bool):
            raise HTTPError(400, "invalid_request", 'the body must be {"approve": true|false, ...}')
        if approve:
            await session.approve(execution_id, note=body.get("note"))
        else:
            await session.deny(execution_id, reason=body.get("reason"))
        return JSONResponse({"execution_id": execution_id, "approved": approve})

    async def stop(self, request: Request) -> Response:
        session = await self._session(request, "stop")
        body = await small_body(request)
        await session.stop(reason=body.get("reason"))
        return JSONResponse({"session_id": session.id}, status_code=202)

    async def fork(self, request: Request) -> Response:
        session = await self._session(request, "fork")
        body = await small_body(request)
        at, new_id = body.get("at"), body.get("session_id")
        if at is not None and not isinstance(at, str):
            raise HTTPError(400, "invalid_request", "at must be a cursor (a string)")
        if new_id is not None:
            await self._check(request, validate.session_id(new_id), "fork")
        fork = await session.fork(at=at, id=new_id)  # an existing id: 409
        root = str(request.scope.get("root_path", "")).rstrip("/")
        return JSONResponse(
            {
                "session_id": fork.id,
                "source": session.id,
                "stream": f"{root}/sessions/{fork.id}/stream",
            },
            status_code=201,
        )

    async def _frames(
        self,
        request: Request,
        session: Session,
        cursor: str | None,
        until: Literal["turn"] | None,
    ) -> AsyncIterator[bytes]:
        yield _sse.retry(self.options.retry_ms)
        events = session.stream(cursor, until=until)
        try:
            async for event in events:
                shown = await self._shown(request, event)
                if shown is not None:
                    yield _sse.frame(event.cursor, shown.kind, shown.data)
        except Exception:
            # The response has started: end it. The client reconnects from the last
            # cursor it received; it never sees what went wrong here.
            logger.exception("stream of session %r failed", session.id)
        finally:
            await events.aclose()


def routes(agent: Agent, **options: Unpack[RouteOptionArgs]) -> list[BaseRoute]:
    """The session routes, to add to a Starlette or FastAPI app's routes (or mount
    :func:`create_app`'s app). Each route answers its own errors.

    The options are :class:`RouteOptions`' fields. Without ``authorize`` they
    refuse to be built unless ``allow_anyone=True``: serving sessions to anyone
    must be a decision, not a default. ``allowed_origins``: the origins
    (``"https://app.example"``) a request with an ``Origin`` header may come from
    (others: 403); ``None`` checks none. ``visible``: see :data:`Visible`.
    ``stream_lifetime``: see :data:`STREAM_LIFETIME`.
    """
    built, _ = _build(agent, RouteOptions(**options))
    return built


def _build(agent: Agent, options: RouteOptions) -> tuple[list[BaseRoute], _Routes]:
    r = _Routes(agent, options)
    built: list[BaseRoute] = [
        Route("/sessions", guard(r.create), methods=["POST"]),
        Route("/sessions/{session_id}/prompts", guard(r.prompt), methods=["POST"]),
        Route("/sessions/{session_id}/stream", guard(r.stream), methods=["GET"]),
        Route("/sessions/{session_id}/approvals", guard(r.approvals), methods=["GET"]),
        Route(
            "/sessions/{session_id}/approvals/{execution_id}",
            guard(r.decide),
            methods=["POST"],
        ),
        Route("/sessions/{session_id}/stop", guard(r.stop), methods=["POST"]),
        Route("/sessions/{session_id}/fork", guard(r.fork), methods=["POST"]),
    ]
    return built, r


def guard(
    endpoint: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """Answer every exception of ``endpoint`` here, as a JSON refusal or a bare 500,
    so that a route works the same mounted in any app, whatever its handlers."""

    async def guarded(request: Request) -> Response:
        try:
            return await endpoint(request)
        except Exception as exc:
            return await handle_error(request, exc)

    guarded.__name__ = getattr(endpoint, "__name__", "endpoint")
    return guarded


async def handle_error(request: Request, exc: Exception) -> Response:
    mapped = _translate(exc)
    if mapped is not None:
        return error_response(mapped.status, mapped.code, mapped.message, mapped.headers)
    logger.exception("%s %s failed", request.method, request.url.path)
    return error_response(500, "internal", "internal server error")


async def _not_found(request: Request, exc: Exception) -> Response:
    return error_response(404, "not_found", "no such route")


async def _method_not_allowed(request: Request, exc: Exception) -> Response:
    return error_response(405, "method_not_allowed", "method not allowed")


def exception_handlers() -> dict[Any, Callable[[Request, Exception], Awaitable[Response]]]:
    """The handlers that map fxworld's errors to statuses, and everything else to a
    bare 500 (logged, never sent)."""
    return {404: _not_found, 405: _method_not_allowed, Exception: handle_error}


def create_app(
    agent: Agent,
    *,
    extra_routes: list[BaseRoute] | None = None,
    **options: Unpack[RouteOptionArgs],
) -> Starlette:
    """An ASGI app serving ``agent``'s sessions; mount it anywhere::

        app = FastAPI()
        app.mount("/agent", create_app(agent, authorize=can_access))

    See :func:`routes` for the options. ``heartbeat`` is the seconds of silence
    after which a stream sends a comment (15 by default).
    """
    built, r = _build(agent, RouteOptions(**options))
    app = Starlette(
        routes=built + list(extra_routes or []),
        exception_handlers=exception_handlers(),
    )
    # app.state.close_streams(): end every open stream at once, e.g. before a
    # graceful shutdown, so clients reconnect (elsewhere) instead of holding it up.
    app.state.close_streams = r.close_streams
    return app
