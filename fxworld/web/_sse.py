"""Server-Sent Events framing, with heartbeats and a buffer of one event.

The stream pulls the next event from its source only once the previous frame was
handed to the server, and the ASGI server's ``send`` waits while the client's
socket buffer is full (uvicorn's flow control), so a slow client slows the reading
of the log down instead of making the server buffer: a connection holds the
frame being sent, the next event, and the one page of the log the source reads
at a time (:func:`fxworld.follow.bounded_follow`: about 1 MiB), plus what the
kernel's socket buffers hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import StreamingResponse

__all__ = ["HEARTBEAT", "RETRY_MS", "frame", "comment", "retry", "heartbeats", "response"]

HEARTBEAT = 15.0
"""Seconds of silence after which the stream sends a comment line, so proxies and
load balancers do not close an idle connection and a dead client is noticed."""

RETRY_MS = 1000
"""The reconnection delay the stream asks an ``EventSource`` to use, in ms."""


def _field(value: str) -> str:
    # A field value cannot hold a line break: it would end the field (and let a
    # value inject fields). Cursors and kinds have none; this keeps it so.
    return value.replace("\r", " ").replace("\n", " ")


def frame(cursor: str, kind: str, data: Any) -> bytes:
    """One event: ``id: <cursor>``, ``event: <kind>``, ``data: <json>``, blank line.

    The JSON is compact and on one line (``json.dumps`` escapes line breaks inside
    strings), so the frame has exactly one ``data`` line.
    """
    payload = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return f"id: {_field(cursor)}\nevent: {_field(kind)}\ndata: {payload}\n\n".encode()


def comment(text: str = "") -> bytes:
    """A comment line: ignored by ``EventSource``, keeps the connection alive."""
    return f": {_field(text)}\n\n".encode()


def retry(ms: int = RETRY_MS) -> bytes:
    """The ``retry:`` field: how long an ``EventSource`` waits before reconnecting."""
    return f"retry: {int(ms)}\n\n".encode()


async def heartbeats(
    frames: AsyncIterator[bytes],
    *,
    every: float = HEARTBEAT,
    stop: asyncio.Event | None = None,
    lifetime: float | None = None,
) -> AsyncIterator[bytes]:
    """Yield ``frames`` as they come, and a comment whenever ``every`` seconds pass
    without one; end as soon as ``stop`` is set (the server is shutting down: the
    client reconnects elsewhere from its last cursor), or once ``lifetime``
    seconds have passed (the client reconnects, and is authorized again).

    Only one pull of ``frames`` is ever pending: a heartbeat does not start a second
    one, so no frame is read ahead of the client. Closing this iterator (the client
    went away) cancels the pending pull and closes ``frames``.
    """
    pending: asyncio.Task[bytes] | None = None
    stopped: asyncio.Task[Any] | None = None
    loop = asyncio.get_running_loop()
    ends = None if lifetime is None else loop.time() + lifetime
    try:
        if stop is not None:
            stopped = asyncio.ensure_future(stop.wait())
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(frames))
            waiting: set[asyncio.Future[Any]] = {pending}
            if stopped is not None:
                waiting.add(stopped)
            timeout = every if ends is None else min(every, ends - loop.time())
            done, _ = await asyncio.wait(
                waiting, timeout=max(timeout, 0), return_when=asyncio.FIRST_COMPLETED
            )
            if stopped is not None and stopped in done:
                return
            if ends is not None and loop.time() >= ends:
                return  # a frame pulled but not sent is not lost: the client resumes
            if not done:
                yield comment("heartbeat")
                continue
            task, pending = pending, None
            try:
                item = task.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        if stopped is not None:
            stopped.cancel()
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        aclose = getattr(frames, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()


def response(frames: AsyncIterator[bytes]) -> StreamingResponse:
    """The ``text/event-stream`` response sending ``frames``, never cached or
    buffered on the way (``X-Accel-Buffering: no`` for nginx)."""
    return StreamingResponse(
        frames,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"},
    )
