"""Vercel Queues push deliveries at the wake route (extra ``fxworld[vercel]``).

A delivery is a POST whose ``ce-type`` is Vercel Queues' CloudEvent type, with the
message (``{"session_id": ...}``, what :class:`~fxworld.push.VercelQueuePush`
sends) as its body and the lease in ``ce-vqs*`` headers. It is verified the way
the ``vercel-queue`` SDK verifies it: by the queue service. Before anything runs,
the route extends the delivery's lease (to the wake's lease, renewed while it
runs, so a crashed function's delivery comes back within a lease) with its
receipt handle, with this
deployment's token and deployment id. A forged receipt, a replay of a delivery
already settled, or a delivery for another deployment is refused by the service:
the route then answers 403 and runs nothing; a malformed one gets 400. Both are
final for the queue (nothing to deliver again); only the real message, still
leased, is redelivered after its lease.

After the run: a session whose work is over (or waits for a person) has its
message acknowledged (200); one with work left (a turn that yielded at the time
limit, or whose crashed run's lease has not run out) asks for redelivery after a
second (``retry_after``) and is answered 200 too, as the SDK answers a handler
that raised ``RetryAfter``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.responses import JSONResponse

from fxworld.push.base import session_of

from ._app import error_response

__all__ = ["is_delivery", "handle_delivery", "EVENT_TYPE"]

EVENT_TYPE = "com.vercel.queue.v2beta"
_TYPE_HEADER = "ce-type"

Run = Callable[[str | None, float], Awaitable[JSONResponse]]


def is_delivery(headers: Mapping[str, str]) -> bool:
    """Whether a request presents itself as a Vercel Queues push delivery."""
    return _TYPE_HEADER in headers


async def handle_delivery(
    body: bytes, headers: Mapping[str, str], started: float, *, lease: float, run: Run
) -> JSONResponse:
    """Verify, run (``run(session_id, started)``, the route's own), settle; see the module."""
    try:
        from vercel.queue import (
            CommunicationError,
            QueueClient,
            QueueError,
            RetryableError,
        )
        from vercel.queue._internal.push import parse_push_delivery_metadata
    except ImportError as e:  # pragma: no cover - depends on the install
        return error_response(
            501, "not_configured", f"Vercel Queues needs vercel-queue ({e}): fxworld[vercel]"
        )
    try:
        metadata: Any = parse_push_delivery_metadata(dict(headers))
    except (ValueError, QueueError) as e:
        return error_response(400, "invalid_delivery", f"not a Vercel Queues delivery: {e}")
    if not metadata.receipt_handle:
        return error_response(400, "invalid_delivery", "the delivery carries no receipt handle")
    session_id = session_of(body)
    client = QueueClient(region=metadata.region)
    seconds = max(1, math.ceil(lease))
    try:  # the queue service vouches for the delivery, or nothing runs
        await client.extend_lease(metadata, seconds)
    except (CommunicationError, RetryableError) as e:
        return error_response(503, "queue_unavailable", f"could not verify: {e}")
    except QueueError as e:
        return error_response(403, "forbidden", f"the queue refused this delivery: {e}")

    async def renew() -> None:  # as the world's lease: a crash frees it within `lease`
        while True:
            await asyncio.sleep(seconds / 3)
            with contextlib.suppress(QueueError):
                await client.extend_lease(metadata, seconds)

    renewing = asyncio.create_task(renew())
    try:
        response = await run(session_id, started)
    finally:
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
    try:
        if response.status_code == 503:  # work left: deliver it again soon
            await client.retry_after(metadata, 1)
        else:
            await client.acknowledge(metadata)
    except QueueError:  # its lease runs out and it is delivered again: harmless
        pass
    return JSONResponse(_body(response), status_code=200)


def _body(response: JSONResponse) -> Any:
    import json

    return json.loads(bytes(response.body)) if response.body else {}
