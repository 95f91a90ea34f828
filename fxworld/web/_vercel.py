"""Vercel Queues push deliveries at the wake route (extra ``fxworld[vercel]``).

A delivery is a POST whose ``ce-type`` is Vercel Queues' CloudEvent type, with the
message (``{"session_id": ...}``, what :class:`~fxworld.push.VercelQueuePush`
sends) as its body and the lease in ``ce-vqs*`` headers. Those headers are read
here (:func:`delivery_metadata`) into the SDK's public ``MessageMetadata``: the
``vercel-queue`` SDK parses a delivery only inside ``accept_and_handle``, which
dispatches to its process-wide ``@subscribe`` registry, runs the subscriber before
the service has vouched for the receipt, and holds every lease for at least 30 s;
its header parser is not public. The delivery is verified the way the SDK's
lease calls verify it: by the queue service. Before anything runs, the route
extends the delivery's lease (to the wake's lease, renewed while it runs, so a
crashed function's delivery comes back within a lease) with its receipt handle,
with this deployment's token and deployment id. A forged receipt, a replay of a
delivery already settled, or a delivery for another deployment is refused by the
service: the route then answers 403 and runs nothing; a malformed one gets 400.
Both are final for the queue (nothing to deliver again); only the real message,
still leased, is redelivered after its lease. A service that fails while it is
asked (it cannot be reached, throttles, or answers 5xx) is no verdict: the route
answers 503 with ``Retry-After``, runs nothing, and the delivery comes again.

No credential is taken from the request: its headers are read only into the
delivery's metadata, and its ``x-vercel-oidc-token`` (which anyone can send) is
never made the ``vercel.headers`` context, where the SDK would cache it for every
later queue and model call of the instance. The queue calls and the model's OIDC
token (:mod:`fxworld.models.resolve`) use this function's own: ``$VERCEL_QUEUE_TOKEN``,
else the OIDC token of its environment and runtime (``$VERCEL_OIDC_TOKEN``, the
token file, the context Vercel's runtime sets). The body is read only after the
queue service has vouched for the delivery.

After the run (the route's own, which answers from how the run said the session
ended, ``WorkResult.ended``, reading nothing after it): a session whose work is
over (or waits for a person), or whose turn yielded and was pushed again (that
new message continues it), has its delivery acknowledged (200); one with work
left that nothing pushed asks for redelivery (``retry_after``) when the route's
``Retry-After`` says: a second after a deadline that came before it ran, the
lease while another run holds it (a crashed run's lease must run out first; a
live one yields or ends, and pushes if it yields), and is answered 200 too, as
the SDK answers a handler that raised ``RetryAfter``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse

from fxworld.push.base import agent_of, session_of

from ._refusals import error_response

if TYPE_CHECKING:
    from vercel.queue import MessageMetadata

__all__ = ["is_delivery", "handle_delivery", "delivery_metadata", "EVENT_TYPE"]

EVENT_TYPE = "com.vercel.queue.v2beta"
_TYPE_HEADER = "ce-type"
_REGION = re.compile(r"[a-z]{2,5}[0-9]{1,2}")

Run = Callable[[str | None, float, str | None], Awaitable[JSONResponse]]


def is_delivery(headers: Mapping[str, str]) -> bool:
    """Whether a request presents itself as a Vercel Queues push delivery."""
    return _TYPE_HEADER in headers


def delivery_metadata(headers: Mapping[str, str]) -> MessageMetadata:
    """The delivery's ``MessageMetadata`` (the SDK's public type), read from its
    CloudEvent headers: ``ce-type`` (:data:`EVENT_TYPE`), ``ce-vqsqueuename`` (the
    topic), ``ce-vqsconsumergroup``, ``ce-vqsmessageid``, ``ce-vqsreceipthandle``,
    ``ce-vqscreatedat``, and optionally ``ce-vqsdeliverycount``, ``ce-vqsregion``,
    ``ce-vqsexpiresat``, ``ce-vqsvisibilitydeadline``. ``headers`` is looked up in
    lower case (a Starlette ``Headers`` is case-insensitive). ``ValueError`` for a
    delivery that lacks one, or carries a malformed one."""
    from vercel.queue import MessageID, MessageMetadata, ReceiptHandle, SanitizedName

    if headers.get(_TYPE_HEADER) != EVENT_TYPE:
        raise ValueError(f"ce-type is not {EVENT_TYPE!r}")
    required = {}
    for name in ("queuename", "consumergroup", "messageid", "receipthandle", "createdat"):
        value = headers.get(f"ce-vqs{name}", "")
        if not value:
            raise ValueError(f"the delivery has no ce-vqs{name}")
        required[name] = value
    region = headers.get("ce-vqsregion") or None
    if region is not None and not _REGION.fullmatch(region):
        raise ValueError(f"ce-vqsregion is not a region: {region!r}")
    count = headers.get("ce-vqsdeliverycount", "1")
    if not count.isdigit():
        raise ValueError(f"ce-vqsdeliverycount is not a count: {count!r}")
    return MessageMetadata(
        message_id=MessageID(required["messageid"]),
        delivery_count=int(count),
        created_at=_instant(required["createdat"], "ce-vqscreatedat"),
        topic=required["queuename"],
        consumer_group=SanitizedName(required["consumergroup"]),
        receipt_handle=ReceiptHandle(required["receipthandle"]),
        content_type=headers.get("content-type"),
        region=region,
        expires_at=_optional_instant(headers.get("ce-vqsexpiresat"), "ce-vqsexpiresat"),
        visibility_deadline=_optional_instant(
            headers.get("ce-vqsvisibilitydeadline"), "ce-vqsvisibilitydeadline"
        ),
    )


async def handle_delivery(
    body: bytes, headers: Mapping[str, str], started: float, *, lease: float, run: Run
) -> JSONResponse:
    """Verify, run (``run(session_id, started, agent)``, the route's own), settle; see
    the module. A delivery naming an agent the route does not serve runs nothing
    and is acknowledged (W19: on a shared topic that agent's route has its own
    consumer group, and its own copy)."""
    try:
        from vercel.queue import QueueClient, QueueError
    except ImportError as e:  # pragma: no cover - depends on the install
        return error_response(
            501, "not_configured", f"Vercel Queues needs vercel-queue ({e}): fxworld[vercel]"
        )
    try:
        metadata = delivery_metadata(headers)
    except ValueError as e:  # SanitizedName's refusal of a bad name is one too
        return error_response(400, "invalid_delivery", f"not a Vercel Queues delivery: {e}")
    client = QueueClient(region=metadata.region)
    seconds = max(1, math.ceil(lease))
    try:  # the queue service vouches for the delivery, or nothing runs
        await client.extend_lease(metadata, seconds)
    except QueueError as e:
        if _service_failed(e):  # the queue's own failure: the delivery comes again
            return error_response(
                503, "queue_unavailable", f"could not verify: {e}", {"Retry-After": "1"}
            )
        return error_response(403, "forbidden", f"the queue refused this delivery: {e}")
    session_id = session_of(body)  # verified: now the body is read

    async def renew() -> None:  # as the world's lease: a crash frees it within `lease`
        while True:
            await asyncio.sleep(seconds / 3)
            with contextlib.suppress(QueueError):
                await client.extend_lease(metadata, seconds)

    renewing = asyncio.create_task(renew())
    try:
        response = await run(session_id, started, agent_of(body))
    finally:
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
    try:
        if response.status_code == 503:  # work left that nothing pushed: deliver again
            await client.retry_after(metadata, _retry_after(response))
        else:
            await client.acknowledge(metadata)
    except QueueError:  # its lease runs out and it is delivered again: harmless
        pass
    return JSONResponse(_body(response), status_code=200)


def _service_failed(e: Exception) -> bool:
    """Whether a queue error during verification is the service's own failure (it
    could not be reached, throttled, or answered 5xx), not a verdict on the
    delivery: answered 503, which the queue retries, never the final 403."""
    from vercel.queue import RetryableError, TokenResolutionError

    status = getattr(e, "status_code", None)
    return isinstance(e, RetryableError | TokenResolutionError) or (
        isinstance(status, int) and status >= 500
    )


def _retry_after(response: JSONResponse) -> int:
    """The route's ``Retry-After`` (1 s after a deadline, the lease while another
    run holds the session): before it, a delivery would find the same."""
    seconds = response.headers.get("retry-after", "1")
    return max(1, int(seconds)) if seconds.isdigit() else 1


def _instant(text: str, header: str) -> datetime:
    """An ISO 8601 instant (``Z`` or an offset; naive means UTC), in UTC."""
    try:
        parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        raise ValueError(f"{header} is not an ISO 8601 instant: {text!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _optional_instant(text: str | None, header: str) -> datetime | None:
    return _instant(text, header) if text else None


def _body(response: JSONResponse) -> Any:
    return json.loads(bytes(response.body)) if response.body else {}
