"""The one scrubber (``fxworld.scrub``): what looks like a secret is masked, the
rest of the text is kept, so an error stays useful and shows no credential."""

from __future__ import annotations

import pytest

from fxworld.models import _retry
from fxworld.scrub import error_text, scrub


@pytest.mark.parametrize(
    ("text", "secret", "kept"),
    [
        (
            "could not connect to postgresql://app:S3cretPassw0rd@db:5432/shop",
            "S3cretPassw0rd",
            "postgresql://app:***@db:5432/shop",
        ),
        ("redis://:hunter2hunter2@cache:6379/0", "hunter2hunter2", "redis://:***@cache"),
        ("postgresql:/u:pw-in-odd-url@host", "pw-in-odd-url", "postgresql:/u:***@host"),
        (
            "401 with Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig",
            "eyJhbGciOiJIUzI1NiJ9",
            "Authorization: Bearer ***",
        ),
        ("sent bearer abcdef0123456789", "abcdef0123456789", "Bearer ***"),
        (
            "headers {'x-api-key': 'sk-live-4f8a9b2c3d4e5f6a'}",
            "4f8a9b2c3d4e5f6a",
            "'x-api-key': '***'",
        ),
        ("x-api-key: live_0123456789abcdef bad", "live_0123456789abcdef", "x-api-key: *** bad"),
        ("invalid key sk-ant-api03-AbCdEf0123456789", "AbCdEf0123456789", "invalid key sk-***"),
        ("login failed: password=correct-horse", "correct-horse", "password=***"),
        ("token ghp_0123456789abcdefghijABCDEFGHIJ", "ghp_0123456789abcdefghij", "token ***"),
        ("aws AKIAIOSFODNN7EXAMPLE denied", "AKIAIOSFODNN7EXAMPLE", "aws *** denied"),
    ],
)
def test_scrub_masks_secret_shapes(text: str, secret: str, kept: str) -> None:
    out = scrub(text)
    assert secret not in out
    assert kept in out


@pytest.mark.parametrize(
    "text",
    [
        "order A-1: shipped",
        "max_tokens=100 is too low; tokens: 5",
        "see https://example.com/path@v2 and mail ops@example.com",
        "the key was rejected",
        "RuntimeError: boom: bad disk",
    ],
)
def test_scrub_keeps_ordinary_text(text: str) -> None:
    assert scrub(text) == text


def test_one_scrubber_for_the_adapters_and_the_engine() -> None:
    assert _retry.scrub is scrub
    assert error_text(ConnectionError("to redis://:pw123456@h/0")) == (
        "ConnectionError: to redis://:***@h/0"
    )
