"""The one scrubber: secrets out of text that is logged, stored or shown.

The model adapters pass every message they raise through :func:`scrub` with
their API keys; the engine passes the error text of a tool or a model through it
before the entry that holds it is written, so a secret never reaches the log, a
stream or a client. Besides the ``secrets`` it is given, it removes what looks
like one: a URL's password, a bearer token, an API key shaped like ``sk-…``,
the value of an ``x-api-key:`` / ``authorization:`` / ``password=`` style field
and a payment card number (13 to 19 digits, spaced or not, that pass the Luhn
check).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

__all__ = ["scrub", "error_text"]

_MASK = "***"

# (pattern, replacement): each keeps what names the secret and masks its value.
_SHAPES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    # scheme://user:password@host (also with the slashes missing)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*:/{0,2}[^\s:/?#@]*):[^\s@/]+@"), r"\1:***@"),
    # a named field: x-api-key: …, authorization: Bearer …, password=…, "token": "…"
    (
        re.compile(
            r"(?i)\b((?:x-)?api[-_]?key|authorization|proxy-authorization|x-auth-token|"
            r"access[-_]?token|refresh[-_]?token|client[-_]?secret|secret|password|passwd|"
            r"pwd|token)([\"']?\s*[:=]\s*[\"']?)(?:(bearer|basic|token)\s+)?[^\s\"'&,;]+"
        ),
        lambda m: f"{m[1]}{m[2]}{m[3] + ' ' if m[3] else ''}***",
    ),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{6,}=*"), "Bearer ***"),
    # provider key shapes: sk-… (OpenAI, Anthropic's sk-ant-…), GitHub, AWS, Slack
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"), "sk-***"),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{16,}"), _MASK),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), _MASK),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"), _MASK),
    # a payment card number: 13..19 digits, in groups split by one space or dash
    (re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])"), lambda m: _card(m[0])),
)


def _card(text: str) -> str:
    """``text`` masked if its digits pass the Luhn check (a card number), else kept."""
    digits = [int(c) for c in text if c.isdigit()]
    total = sum(
        d if i % 2 == 0 else (d * 2 - 9 if d > 4 else d * 2) for i, d in enumerate(reversed(digits))
    )
    return _MASK if total % 10 == 0 else text


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every secret (and every long-enough piece of one that a
    provider may echo back) replaced by ``***``, and then every secret-shaped
    value (see the module docstring) masked."""
    for secret in secrets:
        if not secret:
            continue
        text = text.replace(secret, _MASK)
        # Providers echo keys partly ("sk-abc...wxyz"); drop any 12+ char slice.
        if len(secret) >= 16:
            for size in (len(secret) - 4, 16, 12):
                for start in range(0, len(secret) - size + 1):
                    piece = secret[start : start + size]
                    if piece in text:
                        text = text.replace(piece, _MASK)
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    return text


def error_text(exc: BaseException) -> str:
    """An exception as an entry stores it: ``Type: message``, scrubbed."""
    return scrub(f"{type(exc).__name__}: {exc}")
