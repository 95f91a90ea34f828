"""SQSPush: one SQS message per wake (aiobotocore, extra ``fxworld[s3]``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from typing import Any
from urllib.parse import urlsplit

from fxworld.errors import ConfigurationError

from .base import message_body

__all__ = ["SQSPush", "SQS_MAX_DELAY"]

SQS_MAX_DELAY = 900
"""SQS's longest ``DelaySeconds`` (15 minutes)."""


class SQSPush:
    """Sends ``{"session_id": ..., "agent": ...}`` to the SQS queue ``queue_url`` with
    ``DelaySeconds`` the wake's delay, rounded up.

    A wake due later than :data:`SQS_MAX_DELAY` (15 minutes) sends nothing: it is
    left to the tick (:func:`fxworld.push.tick`), which sends it once overdue; the
    world keeps it meanwhile. ``region`` and ``endpoint_url`` go to the client
    (credentials come from the usual AWS chain); ``client_kwargs`` too. A queue
    URL that is not on ``amazonaws.com`` (a local server) is its own endpoint.

    A FIFO queue (its URL ends in ``.fifo``) is supported: each message's
    ``MessageGroupId`` is its session (so one session's messages are delivered in
    order, one at a time, and sessions in parallel) and its
    ``MessageDeduplicationId`` the message's own ``id`` (never two pushes taken
    for one). A FIFO queue takes no delay per message: a wake due later than now
    sends nothing there and is left to the tick, as past 15 minutes.
    """

    def __init__(
        self,
        queue_url: str,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        **client_kwargs: Any,
    ) -> None:
        if not queue_url.startswith(("http://", "https://")):
            raise ConfigurationError(f"SQSPush needs the queue's URL, not {queue_url[:60]!r}")
        self.queue_url = queue_url
        self.fifo = urlsplit(queue_url).path.rstrip("/").endswith(".fifo")
        self._kwargs: dict[str, Any] = dict(client_kwargs)
        parts = urlsplit(queue_url)
        if endpoint_url is None and not (parts.hostname or "").endswith(".amazonaws.com"):
            endpoint_url = f"{parts.scheme}://{parts.netloc}"
        if region is None and (parts.hostname or "").startswith("sqs."):
            region = (parts.hostname or "").split(".")[1]
        if region:
            self._kwargs["region_name"] = region
        if endpoint_url:
            self._kwargs["endpoint_url"] = endpoint_url
        self._stack: contextlib.AsyncExitStack | None = None
        self._client: Any = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        from fxworld.urls import mask

        return f"SQSPush({mask(self.queue_url)!r})"

    async def _sqs(self) -> Any:
        async with self._lock:
            if self._client is None:
                try:
                    from aiobotocore.session import get_session
                except ImportError as e:  # pragma: no cover - depends on the install
                    raise ConfigurationError(
                        f"SQSPush needs aiobotocore ({e}): pip install 'fxworld[s3]'"
                    ) from None
                stack = contextlib.AsyncExitStack()
                self._client = await stack.enter_async_context(
                    get_session().create_client("sqs", **self._kwargs)
                )
                self._stack = stack
            return self._client

    async def push(self, session_id: str, *, delay: float = 0.0, agent: str | None = None) -> None:
        seconds = max(0, math.ceil(delay))
        if seconds > (0 if self.fifo else SQS_MAX_DELAY):
            return  # left to the tick: see the class
        body = message_body(session_id, agent).decode()
        sqs = await self._sqs()
        if self.fifo:  # no delay per message; a group per session
            await sqs.send_message(
                QueueUrl=self.queue_url,
                MessageBody=body,
                MessageGroupId=session_id,
                MessageDeduplicationId=json.loads(body)["id"],
            )
            return
        await sqs.send_message(QueueUrl=self.queue_url, MessageBody=body, DelaySeconds=seconds)

    async def close(self) -> None:
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            await stack.aclose()
