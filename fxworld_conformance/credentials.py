"""Where a URL's password would leak (W16): the kit looks for it in a world's
repr and in its error messages.

A password leaks when a text shows it in a URL's userinfo (``user:PASSWORD@``),
in a ``password=`` (or ``secret=``, ``token=``) field, or as raw text. The raw
text only counts when the password differs from every other part of the URL: a
password equal to the user name or the database (``postgresql://fxworld:***@h/fxworld``)
shows up where the user or the database is rightly named, and that is no leak.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = ["password_of", "leak"]

_SECRET_WORDS = ("password", "passwd", "pwd", "secret", "token")


def password_of(url: str | None) -> str | None:
    """The password of ``url``: its userinfo's, else the value of a query parameter
    named like a password, secret or token (4 characters at least)."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return None
    if password:
        return unquote(password)
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if any(w in name.lower() for w in _SECRET_WORDS) and len(value) >= 4:
            return value
    return None


def leak(text: str, url: str | None) -> str | None:
    """How ``text`` shows the password of ``url`` (a phrase), or ``None`` if it
    does not."""
    password = password_of(url)
    if not password or not text:
        return None
    pw = re.escape(password)
    if re.search(rf"://[^\s/@:]*:{pw}@", text):
        return "in a URL's userinfo"
    words = "|".join(_SECRET_WORDS)
    if re.search(rf"(?i)\b\w*(?:{words})\w*['\"]?\s*[=:]\s*['\"]?{pw}(?![\w-])", text):
        return "in a password field"
    if password not in _other_parts(url or "") and re.search(rf"(?<![\w-]){pw}(?![\w-])", text):
        return "as raw text"
    return None


def _other_parts(url: str) -> set[str]:
    """Every part of ``url`` that a message may rightly show: scheme, user, host,
    port, path segments, and the values of parameters that are not secrets."""
    parts = urlsplit(url)
    found = {parts.scheme, parts.username or "", parts.hostname or ""}
    found.add(str(parts.port) if parts.port else "")
    found.update(unquote(seg) for seg in parts.path.split("/"))
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if not any(w in name.lower() for w in _SECRET_WORDS):
            found.add(value)
    found.discard("")
    return found
