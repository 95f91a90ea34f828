"""VercelQueuePush: one Vercel Queues message per wake (the ``vercel-queue`` SDK,
extra ``fxworld[vercel]``)."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from fxworld import validate
from fxworld.errors import ConfigurationError

__all__ = ["VercelQueuePush", "DEFAULT_TOPIC", "VERCEL_MAX_DELAY"]

DEFAULT_TOPIC = "fxworld-wakes"
"""The topic pushes go to when none is named; the wake route subscribes to it."""

VERCEL_MAX_DELAY = 86_400
"""The longest delay a message is sent with, in seconds: a message's delay may not
exceed its retention (24 h by default), and the queue refuses one that does."""


class VercelQueuePush:
    """Sends ``{"session_id": ..., "agent": ...}`` to the Vercel Queues topic ``topic`` with the
    wake's delay. ``client``: a ``vercel.queue.QueueClient`` (by default one made
    from the environment: on Vercel, the deployment's OIDC token and region;
    elsewhere ``VERCEL_QUEUE_BASE_URL``, ``VERCEL_QUEUE_TOKEN``, ``VERCEL_REGION``).
    A delay longer than :data:`VERCEL_MAX_DELAY` (24 h, the message's retention) is
    sent as 24 h, which the queue accepts: that message comes early, finds the wake
    not yet due and runs nothing, and the tick (:func:`fxworld.push.tick`) sends
    the wake's message once it is overdue; the world keeps it meanwhile.
    """

    def __init__(self, topic: str = DEFAULT_TOPIC, *, client: Any = None) -> None:
        if not topic or not all(c.isalnum() or c in "_-" for c in topic):
            raise ConfigurationError(f"a Vercel Queues topic is [A-Za-z0-9_-]+, not {topic!r}")
        self.topic = topic
        self._client = client

    def __repr__(self) -> str:
        return f"VercelQueuePush({self.topic!r})"

    def _queue(self) -> Any:
        if self._client is None:
            try:
                from vercel.queue import QueueClient
            except ImportError as e:  # pragma: no cover - depends on the install
                raise ConfigurationError(
                    f"VercelQueuePush needs vercel-queue ({e}): pip install 'fxworld[vercel]'"
                ) from None
            self._client = QueueClient()
        return self._client

    async def push(self, session_id: str, *, delay: float = 0.0, agent: str | None = None) -> None:
        payload = {"session_id": validate.session_id(session_id)}
        if agent is not None:  # W19: a route of another agent acknowledges it unrun
            payload["agent"] = validate.agent_name(agent)
        seconds = min(math.ceil(delay), VERCEL_MAX_DELAY) if delay > 0 else 0
        later = timedelta(seconds=seconds) if seconds else None
        await self._queue().send(self.topic, payload, delay=later)

    async def close(self) -> None:
        return None
