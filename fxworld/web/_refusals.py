"""What every web route answers when it refuses: :class:`HTTPError`, the table that
turns fxworld's typed errors into statuses and codes, and :func:`guard`, which answers
every exception of a route here.

Every refusal is a JSON body ``{"error": <code>, "message": <text>}`` with its
status; an unexpected exception is logged and answered with a bare 500, so a client
never sees a stack trace or an internal message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from fxworld.errors import (
    AlreadyDecided,
    ApprovalExpired,
    BackendUnavailable,
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

__all__ = [
    "HTTPError",
    "RETRY_AFTER",
    "error_response",
    "exception_handlers",
    "guard",
    "handle_error",
]

logger = logging.getLogger("fxworld.web")


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
