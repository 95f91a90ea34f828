"""The options of the session routes (:func:`~fxworld.web.routes`,
:func:`~fxworld.web.create_app`): one frozen :class:`RouteOptions`, checked once when
it is made and passed whole, and the types of its hooks (:data:`Authorize`,
:data:`ContextHook`, :data:`Visible`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from starlette.requests import Request

from fxworld.errors import ConfigurationError

from . import _sse

if TYPE_CHECKING:
    from fxworld.engine import StreamEvent

__all__ = [
    "Action",
    "Authorize",
    "ContextHook",
    "MAX_PROMPT_BYTES",
    "RouteOptions",
    "RouteOptionArgs",
    "STREAM_LIFETIME",
    "Visible",
]

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
