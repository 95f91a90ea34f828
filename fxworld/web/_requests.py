"""What every web route checks of a request before it acts: the ``Origin`` and the
JSON media type (:func:`check_request`), ``authorize`` (:func:`ask_authorize`), and a
body read within a byte limit under a strict ``Content-Length`` (:func:`read_body`,
:func:`small_body`). None of them reads a byte of a body it would refuse by its
headers.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from starlette.requests import Request

from ._refusals import HTTPError

__all__ = [
    "ask_authorize",
    "check_request",
    "content_length",
    "read_body",
    "small_body",
    "takes_context",
]

logger = logging.getLogger("fxworld.web")

_MAX_SMALL_BODY = 16 * 1024  # a decision or a stop: a note or a reason

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
