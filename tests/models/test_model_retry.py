"""The retry policy's pieces: Retry-After parsing, backoff bounds, key scrubbing."""

from __future__ import annotations

import email.utils
import time

import pytest

from fxworld.models._retry import RetryPolicy, retry_after_seconds, scrub, should_retry_status


def test_retry_after_forms() -> None:
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": "1.5"}) == 1.5
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (retry_after_seconds({"retry-after": later}) or 0) <= 31
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None and retry_after_seconds(None) is None


def test_which_statuses_are_retried() -> None:
    assert all(should_retry_status(s, {}) for s in (408, 409, 429, 500, 502, 503, 504, 529))
    assert not any(should_retry_status(s, {}) for s in (400, 401, 403, 404, 413, 422))
    assert should_retry_status(400, {"x-should-retry": "true"})
    assert not should_retry_status(503, {"x-should-retry": "false"})


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=8.0, jitter=0.5)
    for retry, full in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (10, 8.0)]:
        waits = {policy.backoff(retry) for _ in range(50)}
        assert all(full * 0.5 <= w <= full for w in waits)
        assert len(waits) > 1  # jittered


def test_bad_policies_are_refused() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(jitter=2.0)


def test_scrub_removes_whole_and_partly_echoed_keys() -> None:
    key = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX"
    assert scrub(f"bad key {key}", [key]) == "bad key ***"
    echoed = f"Incorrect API key provided: {key[:6]}...{key[-14:]}"
    assert key[-14:] not in scrub(echoed, [key])
    assert scrub("nothing secret", [None, ""]) == "nothing secret"
