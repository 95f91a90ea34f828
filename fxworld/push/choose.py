"""Choosing a push: by object, or from one URL (``FXWORLD_PUSH``).

URL forms:

- ``sqs+https://sqs.<region>.amazonaws.com/<account>/<queue>`` (``sqs+http://`` for a
  local server): :class:`~fxworld.push.sqs.SQSPush` on the queue URL after ``sqs+``;
  ``?region=`` sets the region (else read from the host, else the AWS chain).
- ``vercel-queue://<topic>``: :class:`~fxworld.push.vercel.VercelQueuePush` (the
  client from the environment).
- ``https://...`` or ``http://...``: :class:`~fxworld.push.http.HTTPPush` to that
  route, signed with ``$FXWORLD_WAKE_SECRET``.

Any of them with ``{agent}`` in it (``vercel-queue://wakes-{agent}``): one queue per
agent, a :class:`~fxworld.push.agents.PerAgentPush` sending each message to the
queue named for the agent that owns the session (W19).
"""

from __future__ import annotations

import os
import weakref
from urllib.parse import parse_qs, urlsplit, urlunsplit

from fxworld.errors import ConfigurationError
from fxworld.protocol import World

from .base import Push
from .world import PushingWorld

__all__ = ["ENV_VAR", "push_from_url", "with_push"]

ENV_VAR = "FXWORLD_PUSH"
"""The environment variable naming the push (one URL), like ``FXWORLD_URL``."""

_wrapped: weakref.WeakKeyDictionary[object, dict[int, PushingWorld]] = weakref.WeakKeyDictionary()
_from_env: dict[str, Push] = {}


def push_from_url(url: str) -> Push:
    """The push a URL names (see the module); ``ConfigurationError`` for any other."""
    if "{agent}" in url:
        from .agents import PerAgentPush

        push_from_url(url.replace("{agent}", "agent"))  # a bad URL fails now
        return PerAgentPush(lambda name: push_from_url(url.replace("{agent}", name)))
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme in ("sqs+https", "sqs+http"):
        from .sqs import SQSPush

        parts = urlsplit(url[len("sqs+") :])
        region = next(iter(parse_qs(parts.query).get("region") or []), None)
        return SQSPush(urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")), region=region)
    if scheme == "vercel-queue":
        from .vercel import VercelQueuePush

        topic = url.partition("://")[2].strip("/")
        return VercelQueuePush(topic) if topic else VercelQueuePush()
    if scheme in ("http", "https"):
        from .http import HTTPPush

        secret = os.environ.get("FXWORLD_WAKE_SECRET")
        if not secret:
            raise ConfigurationError(
                f"an http(s) {ENV_VAR} signs with $FXWORLD_WAKE_SECRET, which is not set"
            )
        return HTTPPush(url, secret)
    raise ConfigurationError(
        f"{ENV_VAR}: unknown push URL scheme {scheme!r}; expected sqs+https://..., "
        "vercel-queue://topic or https://..."
    )


def with_push(world: World, push: Push | str | None = None) -> World:
    """``world`` wrapped so that it pushes (:class:`PushingWorld`): with ``push``
    (a Push or a URL), else with ``$FXWORLD_PUSH``; ``world`` itself when neither
    is set or it pushes already. The same world and push give the same wrapper,
    so a world is set up once."""
    if isinstance(world, PushingWorld):
        return world
    if push is None:
        url = os.environ.get(ENV_VAR)
        if not url:
            return world
        push = _from_env.get(url)
        if push is None:
            push = _from_env[url] = push_from_url(url)
    elif isinstance(push, str):
        push = push_from_url(push)
    if not isinstance(push, Push):
        raise ConfigurationError(f"push must be a Push or a URL, not {type(push).__name__}")
    try:
        by_push = _wrapped.setdefault(world, {})
    except TypeError:  # a world that takes no weak reference: not cached
        return PushingWorld(world, push)
    made = by_push.get(id(push))
    if made is None or made.push is not push:
        made = by_push[id(push)] = PushingWorld(world, push)
    return made
