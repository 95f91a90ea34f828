"""HMAC-SHA256 signatures for the wake handler's requests.

A sender (a push queue's publisher, a cron job, a test) signs the exact bytes of
the request body together with a Unix timestamp::

    signature = hex(HMAC-SHA256(secret, f"{timestamp}.".encode() + body))

and sends ``X-Fxworld-Timestamp: <timestamp>`` and
``X-Fxworld-Signature: sha256=<signature>``. The handler recomputes it, compares
in constant time, and refuses a timestamp more than :data:`REPLAY_WINDOW` seconds
away from its own clock, so a captured request cannot be replayed later.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping

__all__ = [
    "TIMESTAMP_HEADER",
    "SIGNATURE_HEADER",
    "REPLAY_WINDOW",
    "sign",
    "signed_headers",
    "verify",
]

TIMESTAMP_HEADER = "X-Fxworld-Timestamp"
SIGNATURE_HEADER = "X-Fxworld-Signature"
REPLAY_WINDOW = 300.0
"""Seconds a signed request stays valid on either side of its timestamp."""

_PREFIX = "sha256="


def _key(secret: str | bytes) -> bytes:
    return secret.encode() if isinstance(secret, str) else bytes(secret)


def sign(secret: str | bytes, body: bytes, timestamp: int) -> str:
    """The signature header's value for ``body`` sent at ``timestamp``."""
    mac = hmac.new(_key(secret), f"{int(timestamp)}.".encode() + body, hashlib.sha256)
    return _PREFIX + mac.hexdigest()


def signed_headers(
    secret: str | bytes, body: bytes, *, timestamp: int | None = None
) -> dict[str, str]:
    """The two headers that make ``body`` a signed wake request (now, by default)."""
    ts = int(time.time()) if timestamp is None else int(timestamp)
    return {TIMESTAMP_HEADER: str(ts), SIGNATURE_HEADER: sign(secret, body, ts)}


def verify(
    secret: str | bytes,
    body: bytes,
    headers: Mapping[str, str],
    *,
    now: float | None = None,
    window: float = REPLAY_WINDOW,
) -> bool:
    """True if ``headers`` carry a valid, fresh signature of ``body``.

    ``headers`` is looked up case-insensitively when it is a Starlette ``Headers``;
    a plain dict must use the canonical names.
    """
    ts_text = headers.get(TIMESTAMP_HEADER) or headers.get(TIMESTAMP_HEADER.lower())
    given = headers.get(SIGNATURE_HEADER) or headers.get(SIGNATURE_HEADER.lower())
    if not ts_text or not given or len(ts_text) > 20:
        return False
    if not (ts_text.isascii() and ts_text.isdigit()):
        return False
    ts = int(ts_text)
    current = time.time() if now is None else now
    if abs(current - ts) > window:
        return False
    return hmac.compare_digest(sign(secret, body, ts).encode(), given.strip().encode())
