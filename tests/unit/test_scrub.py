"""The one scrubber (``fxworld.scrub``): what looks like a secret is masked, the
rest of the text is kept, so an error stays useful and shows no credential."""

from __future__ import annotations

import pytest

from fxworld.models import _retry
from fxworld.scrub import error_text, scrub, shown


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


WORST_SHAPES = ["a.", "a:", "x://a:b/", "x://u:p@", "token= ", "bearer ", "sk-", "4242 ", "a@"]


def unbounded_repeats(tree: object) -> list[str]:
    """The repeats of a parsed pattern that may backtrack: unbounded and not
    possessive."""
    from re import _constants as c  # type: ignore[attr-defined]

    found: list[str] = []
    for op, av in tree:  # type: ignore[attr-defined]
        if op in (c.MAX_REPEAT, c.MIN_REPEAT):
            low, high, sub = av
            if high == c.MAXREPEAT:
                found.append(f"{op} {low}..")
            found += unbounded_repeats(sub)
        elif op is c.POSSESSIVE_REPEAT:
            found += unbounded_repeats(av[2])
        elif op is c.SUBPATTERN:
            found += unbounded_repeats(av[3])
        elif op in (c.ASSERT, c.ASSERT_NOT):
            found += unbounded_repeats(av[1])
        elif op is c.ATOMIC_GROUP:
            found += unbounded_repeats(av)
        elif op is c.BRANCH:
            for branch in av[1]:
                found += unbounded_repeats(branch)
    return found


def test_one_prompt_freezes_the_inspector() -> None:
    """Issue 34 item 2: every pattern of the scrubber is linear by construction
    (no repeat that can backtrack; the URL password is found from each ``@``,
    over runs that do not overlap), and each one gets through 256 KiB of every
    worst shape found, the quadratic ``a.a.a...`` of the old URL pattern included
    (it took 13 s on 64 KiB, some 3.5 minutes on 256 KiB)."""
    from re import _parser  # type: ignore[attr-defined]

    from fxworld.scrub import _SHAPES  # the patterns are the module's own

    for pattern, _ in _SHAPES:
        assert unbounded_repeats(_parser.parse(pattern.pattern, pattern.flags)) == [], (
            pattern.pattern
        )
    for unit in WORST_SHAPES:
        text = (unit * (256 * 1024 // len(unit) + 1))[: 256 * 1024]
        for pattern, replacement in _SHAPES:
            pattern.sub(replacement, text)  # a quadratic pattern would take minutes
        scrub(text)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("postgresql://app:S3cretPassw0rd@db/shop " * 3, "S3cretPassw0rd"),
        ("x " * 10 + "https://user:" + "p" * 100 + "@host", "ppppp"),  # the @ past the cut
        ("x " * 10 + "Authorization: Bearer abcdefghijklmnop", "abcdef"),
        ("x " * 10 + "key sk-ant-abcdefghijklmnopqrstuvwxyz", "sk-ant-abc"),
        ("x " * 10 + "card 4242 4242 4242 4242", "4242 4242"),
        ("x " * 10 + "card 4242-4242-4242-4242", "4242-4242"),
    ],
)
def test_a_value_cut_for_a_page_never_shows_part_of_a_secret(text: str, secret: str) -> None:
    for limit in range(1, len(text)):
        out = shown(text, limit)
        assert secret not in out, (limit, out)
        assert out.endswith(f"… ({len(text)} characters)")
    assert shown("short", 10) == "short"
    assert shown("password=hunter2 ok", 100) == "password=*** ok"
