"""Retries and error shaping shared by the provider adapters.

Each adapter turns its SDK's exceptions into :class:`ModelError` in one function
(its error boundary); this module decides whether and when to try again:

- 408, 409, 429, 5xx (incl. 529 overloaded), connection errors, timeouts and
  broken or malformed streams are retried with exponential backoff and jitter;
  a ``Retry-After`` / ``Retry-After-Ms`` header is honoured (an ``x-should-retry``
  header, when present, decides);
- retries are bounded by a count *and* by a time budget: a wait that would pass
  the budget is not started; the last error is raised instead, with
  ``retryable=False`` so that the budget is not multiplied by a caller's retries
  (the engine fails the turn with it);
- a call is retried only while it has not yet streamed text to the caller:
  once text went out, a failure is raised (``retryable=True``) so that the
  engine, which saved that text, can mark it discarded and call again.

Every message that leaves an adapter passes through :func:`scrub` (the one
scrubber, :mod:`fxworld.scrub`), so an API key never appears in an exception
message, a log entry or a repr.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fxworld.models.base import ModelError, ModelEvent, TextDelta
from fxworld.scrub import scrub

__all__ = ["RetryPolicy", "retry_after_seconds", "scrub", "provider_message", "stream_with_retries"]

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})


@dataclass(frozen=True)
class RetryPolicy:
    """How an adapter retries a failed call.

    ``max_attempts`` counts the first try (5: one try and up to four retries);
    ``max_elapsed`` is the time budget in seconds from the first try: no wait is
    started that would end after it. The n-th wait is
    ``min(max_delay, base_delay * 2**n)`` scaled by a random factor in
    ``[1 - jitter, 1]``, or what the provider's ``Retry-After`` asks for.
    """

    max_attempts: int = 5
    max_elapsed: float = 90.0
    base_delay: float = 0.5
    max_delay: float = 20.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("RetryPolicy.max_attempts must be at least 1")
        if self.max_elapsed < 0 or self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("RetryPolicy times must not be negative")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("RetryPolicy.jitter must be within [0, 1]")

    def backoff(self, retry: int) -> float:
        """The wait before retry number ``retry`` (0 for the first retry)."""
        delay = min(self.max_delay, self.base_delay * (2.0 ** min(retry, 60)))
        return delay * (1.0 - self.jitter * random.random())


class RetryableModelError(ModelError):
    """A failure that trying again may fix; ``retry_after`` is the provider's ask."""

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, retryable=True, status=status)
        self.retry_after = retry_after


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the provider asks to wait: ``retry-after-ms``, then ``retry-after``
    (seconds, or an HTTP date). ``None`` when absent or unreadable."""
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(raw)
    if parsed is None:
        return None
    return max(0.0, float(email.utils.mktime_tz(parsed) - time.time()))


def should_retry_status(status: int, headers: Mapping[str, str] | None) -> bool:
    """Whether an HTTP error status is worth retrying (``x-should-retry`` wins)."""
    hint = headers.get("x-should-retry") if headers is not None else None
    if hint == "true":
        return True
    if hint == "false":
        return False
    return status in RETRYABLE_STATUS or status >= 500


def provider_message(body: object, fallback: str) -> tuple[str | None, str]:
    """``(error type, message)`` from a provider error body; both providers use
    ``{"error": {"type": ..., "message": ...}}`` (Anthropic nests it in an
    ``{"type": "error"}`` envelope)."""
    if isinstance(body, dict):
        err: Any = body.get("error", body)
        if isinstance(err, dict):
            message = err.get("message")
            kind = err.get("type") or err.get("code")
            if isinstance(message, str) and message:
                return (str(kind) if kind else None), message
        elif isinstance(err, str) and err:
            return None, err
    if isinstance(body, str) and body.strip():
        return None, body.strip()
    return None, fallback


async def stream_with_retries(
    attempt: Callable[[], AsyncGenerator[ModelEvent, None]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Any] = asyncio.sleep,
) -> AsyncGenerator[ModelEvent, None]:
    """Run ``attempt()`` and pass its events on, retrying retryable failures as
    long as no text has been passed on yet, within ``policy``."""
    started = time.monotonic()
    tries = 0
    while True:
        tries += 1
        sent_text = False
        events = attempt()
        try:
            async for event in events:
                if isinstance(event, TextDelta):
                    sent_text = True
                yield event
            return
        except RetryableModelError as e:
            if sent_text:
                raise RetryableModelError(
                    f"{e} (after part of the reply had streamed; not retried here)",
                    status=e.status,
                ) from None
            # The budget is spent: raised as not retryable, so that nobody above
            # multiplies it (the engine fails the turn with this message).
            if tries >= policy.max_attempts:
                raise ModelError(
                    f"{e} (gave up after {_attempts(tries)})", retryable=False, status=e.status
                ) from None
            delay = e.retry_after if e.retry_after is not None else policy.backoff(tries - 1)
            elapsed = time.monotonic() - started
            if elapsed + delay > policy.max_elapsed:
                raise ModelError(
                    f"{e} (gave up after {_attempts(tries)} in {elapsed:.1f} s: the next wait of "
                    f"{delay:.1f} s would pass the retry budget of {policy.max_elapsed:.0f} s)",
                    retryable=False,
                    status=e.status,
                ) from None
            await sleep(delay)
        finally:
            # A consumer that stops early (a handover) closes the HTTP stream now.
            await events.aclose()


def _attempts(n: int) -> str:
    return f"{n} attempt" if n == 1 else f"{n} attempts"
