"""Serve sessions over HTTP (extra ``web``: Starlette and uvicorn).

- :func:`create_app` / :func:`routes`: ``POST /sessions``,
  ``POST /sessions/{id}/prompts`` and ``GET /sessions/{id}/stream`` (Server-Sent
  Events, resumable with ``Last-Event-ID`` or ``?cursor=``), as an ASGI app to
  mount in FastAPI, Starlette or any ASGI server; ``GET /sessions/{id}/approvals``,
  ``POST /sessions/{id}/approvals/{execution_id}`` and ``POST /sessions/{id}/stop``
  for tools that wait for a person and for Stop.
- :func:`wake_handler` (``wake_handler(agent, secret=...)``, a
  :class:`WakeHandler`): an endpoint for push queues, cron and serverless
  functions that runs due turns on a signed request.
- :func:`signed_headers`: the headers that sign a wake request's body.
- :func:`static_files`: the app serving a page's directory beside the routes (never
  the world's own files).

- :func:`create_inspector` (``create_inspector(world, authorize=...)``): the
  inspector, pages that show a world's sessions live, with Approve, Deny and Stop.

``fxworld serve module:agent`` runs both with uvicorn, plus in-process workers;
``fxworld inspect --world URL`` runs the inspector.
"""

from __future__ import annotations

try:
    import starlette  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the install
    from fxworld.errors import ConfigurationError

    raise ConfigurationError(
        f"fxworld.web needs Starlette ({e}); install it with: pip install 'fxworld[web]'"
    ) from None

from fxworld.signing import (
    REPLAY_WINDOW,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    sign,
    signed_headers,
    verify,
)

from ._app import create_app, routes
from ._inspector import InspectAction, InspectorOptions, create_inspector
from ._options import MAX_PROMPT_BYTES, STREAM_LIFETIME, Action, Authorize, Visible
from ._refusals import HTTPError
from ._sse import HEARTBEAT
from ._static import static_files
from ._wake import SECRET_ENV, WakeHandler, wake_handler

__all__ = [
    "create_app",
    "create_inspector",
    "InspectAction",
    "InspectorOptions",
    "routes",
    "Authorize",
    "Action",
    "HTTPError",
    "MAX_PROMPT_BYTES",
    "STREAM_LIFETIME",
    "Visible",
    "HEARTBEAT",
    "WakeHandler",
    "wake_handler",
    "SECRET_ENV",
    "sign",
    "signed_headers",
    "verify",
    "REPLAY_WINDOW",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "static_files",
]
