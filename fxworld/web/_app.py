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
status (``_refusals.py``); an unexpected exception is logged and answered with a bare
500, so a client never sees a stack trace or an internal message.

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
:class:`RouteOptions` (``_options.py``), checked once when it is made and passed
whole; the request checks and body readers are in ``_requests.py``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal, Unpack, cast

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from fxworld import validate
from fxworld.engine import log
from fxworld.engine.session import StreamEvent
from fxworld.engine.subagents import child_session_id, is_child_session_id

from . import _sse
from ._options import Action, RouteOptionArgs, RouteOptions
from ._refusals import HTTPError, exception_handlers, guard
from ._requests import ask_authorize, check_request, read_body, small_body

if TYPE_CHECKING:
    from fxworld.engine import Agent, Session

__all__ = ["create_app", "routes"]

logger = logging.getLogger("fxworld.web")

_MAX_KEY_CHARS = 200


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
            session = self.agent.session(_not_reserved(chosen), context=session.context)
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
            await self._check(request, _not_reserved(new_id), "fork")
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


def _not_reserved(session_id: Any) -> str:
    """A new session's id a client chose, checked; not of the form an agent
    tool's child session has (a client must not make one before its call: 400)."""
    checked: str = validate.session_id(session_id)
    if is_child_session_id(checked):
        prefix = child_session_id("")
        raise HTTPError(400, "invalid_request", f"session ids {prefix}... are reserved")
    return checked


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
