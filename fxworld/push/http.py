"""HTTPPush: a signed POST to a wake route (Cloud Tasks, Cloud Run, any webhook)."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

from fxworld.errors import ConfigurationError

from .base import message_body

__all__ = ["HTTPPush"]


class HTTPPush:
    """POSTs ``{"session_id": ..., "agent": ...}`` to ``url``, signed with ``secret`` exactly as
    :func:`fxworld.web.wake_handler` checks it (HMAC-SHA256 of timestamp and body).

    The route runs the turn before it answers, so a push waits at most ``timeout``
    seconds: a request that was sent and is still being answered then counts as
    rung. A refused connection or an answer of 4xx/5xx other than 503 (the route's
    "still working") raises, and the caller counts it as a failed push.
    HTTP has no delay: a wake due later than now (an approval's timeout) sends
    nothing here and is left to the tick (:func:`fxworld.push.tick`), which sends
    it once overdue.
    """

    def __init__(self, url: str, secret: str | bytes, *, timeout: float = 2.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"HTTPPush needs an http(s) URL, not {url[:40]!r}")
        if not secret:
            raise ConfigurationError("HTTPPush needs the wake route's secret")
        self.url = url
        self._secret = secret
        self.timeout = timeout

    def __repr__(self) -> str:  # never the secret, nor a credential in the URL (W16)
        from fxworld.urls import mask

        return f"HTTPPush({mask(self.url.split('?')[0])!r})"

    __str__ = __repr__

    async def push(self, session_id: str, *, delay: float = 0.0, agent: str | None = None) -> None:
        if delay > 0:
            return  # left to the tick: see the class
        from fxworld.signing import signed_headers

        body = message_body(session_id, agent)
        headers = {"Content-Type": "application/json", **signed_headers(self._secret, body)}
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        await asyncio.to_thread(self._send, request)

    def _send(self, request: urllib.request.Request) -> None:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout):
                return
        except urllib.error.HTTPError as e:
            if e.code != 503:  # 503: the route took it and asks for a redelivery
                raise
        except TimeoutError:
            return  # sent; the route is running the turn

    async def close(self) -> None:
        return None
