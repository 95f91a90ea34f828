"""The one scrubber: secrets out of text that is logged, stored or shown.

The model adapters pass every message they raise through :func:`scrub` with
their API keys; the engine passes the error text of a tool or a model through it
before the entry that holds it is written, so a secret never reaches the log, a
stream or a client. Besides the ``secrets`` it is given, it removes what looks
like one: a URL's password, a bearer token, an API key shaped like ``sk-…``,
the value of an ``x-api-key:`` / ``authorization:`` / ``password=`` style field
and a payment card number (13 to 19 digits, spaced or not, that pass the Luhn
check). :func:`shown` is what a page shows of a value: scrubbed and cut, with no
part of a secret at the cut. Every pattern is linear in the length of the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

__all__ = ["scrub", "shown", "shown_start", "error_text", "SHOWN_CHARS"]

_MASK = "***"

SHOWN_CHARS = 4000
"""How much of one value a page shows (:func:`shown`); the log keeps it whole."""

# Each shape is linear in the length of the text, by construction: every repeat is
# possessive (``*+``, ``++``, ``{n,}+``) or bounded, so an attempt at one position
# is one pass with no backtracking, and an attempt either starts where the previous
# character cannot begin the shape (a lookbehind) or passes only over characters no
# other attempt passes over. The URL password, whose parts share characters
# (``a.a.a...``, ``a:a:a...`` made the old pattern quadratic), is found from each
# ``@`` by :func:`_url_password`, over runs of the text that do not overlap.
# tests/unit/test_scrub.py checks both properties; benchmarks/bench_scrub.py
# prints the time per MiB.

_AT_RUN = re.compile(r"(?<![^\s@])[^\s@]++@")
"""A run of characters that are neither a space nor ``@``, ended by ``@``: where a
``user:password@`` can be; runs never overlap, each is read once."""

_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")

# (pattern, replacement): each keeps what names the secret and masks its value.
_SHAPES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    # scheme://user:password@host (also with the slashes missing)
    (_AT_RUN, lambda m: _url_password(m[0])),
    # a named field: x-api-key: …, authorization: Bearer …, password=…, "token": "…"
    (
        re.compile(
            r"(?i)\b((?:x-)?api[-_]?key|authorization|proxy-authorization|x-auth-token|"
            r"access[-_]?token|refresh[-_]?token|client[-_]?secret|secret|password|passwd|"
            r"pwd|token)([\"']?+\s*+[:=]\s*+[\"']?+)(?>(bearer|basic|token)\s++)?+[^\s\"'&,;]++"
        ),
        lambda m: f"{m[1]}{m[2]}{m[3] + ' ' if m[3] else ''}***",
    ),
    (re.compile(r"(?i)\bbearer\s++[A-Za-z0-9._~+/\-]{6,}+=*+"), "Bearer ***"),
    # provider key shapes: sk-… (OpenAI, Anthropic's sk-ant-…), GitHub, AWS, Slack
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}+"), "sk-***"),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{16,}+"), _MASK),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), _MASK),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}+"), _MASK),
    # a payment card number: 13..19 digits, in groups split by one space or dash
    (re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])"), lambda m: _card(m[0])),
)


def _url_password(found: str) -> str:
    """``found`` (a run ending in ``@``) with the password of a URL's
    ``scheme://user:password@`` (or ``scheme:user:password@``) in it masked.

    The password cannot hold ``/``, the user neither ``/`` nor ``:``; the scheme is
    a letter at a word boundary, then letters, digits, ``+``, ``.`` or ``-``. Each
    step reads the run once: linear."""
    run = found[:-1]
    head, slash, tail = run.rpartition("/")
    user, colon, password = tail.partition(":")
    if slash and colon and password and not _query_mark(user):
        rest = head.rstrip("/")
        slashes = len(head) - len(rest) + 1
        if slashes <= 2 and rest.endswith(":") and _ends_with_scheme(rest[:-1]):
            return f"{run[: len(run) - len(password)]}{_MASK}@"
    # no slash before the user: scheme:user:password, all in the last part
    start = len(run) - len(tail)
    parts = tail.split(":")
    for i in range(len(parts) - 2):
        start += len(parts[i]) + 1
        user_end = start + len(parts[i + 1])
        if user_end + 1 < len(run) and not _query_mark(parts[i + 1]):
            if _ends_with_scheme(parts[i]):
                return f"{run[: user_end + 1]}{_MASK}@"
    return found


def _query_mark(user: str) -> bool:
    return "?" in user or "#" in user


def _ends_with_scheme(text: str) -> bool:
    """Whether ``text`` ends with a URL scheme that starts at a word boundary."""
    i = len(text)
    while i > 0 and text[i - 1] in _SCHEME_CHARS:
        i -= 1
    for j in range(i, len(text)):
        before = text[j - 1] if j > 0 else " "
        if text[j].isalpha() and not (before.isalnum() or before == "_"):
            return True
    return False


def shown(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` as a page shows it: scrubbed, and cut to at most ``limit``
    characters followed by how long it was. The cut never shows part of a secret:
    the last word before it (which may be a secret the cut splits, or a URL
    password whose ``@`` is beyond it) and any digits, spaces and dashes ending
    what is kept (part of a card number) are dropped too. The scrubber reads no
    more than ``limit`` characters, whatever the length of ``text``."""
    if len(text) <= limit:
        return scrub(text)
    return f"{shown_start(text, limit)}… ({len(text)} characters)"


def shown_start(text: str, limit: int) -> str:
    """The start of ``text`` that :func:`shown` keeps when it cuts: at most ``limit``
    characters, scrubbed, with no part of a secret at the cut (and no note of the
    length: the caller says how long the whole is)."""
    if len(text) <= limit:
        return scrub(text)
    head = text[:limit]
    cut = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    return scrub(head[: max(cut, 0)].rstrip("0123456789 -\t\r\n"))


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
