"""World URLs: parsing the common parts and masking credentials (W16).

Public so that every backend's ``from_url`` reads ``?namespace=`` the same way and
never shows a password.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, parse_qsl, unquote_plus, urlencode, urlsplit

from fxworld.errors import ConfigurationError

__all__ = ["mask", "mask_urls", "parse", "split_query", "unparseable", "with_query"]

_HIDDEN = "***"
_PLAIN_USER = re.compile(r"[^:/?#@\s]*")
# A "user:password@" that is not after "://" ("postgresql:/u:pw@host").
_USERINFO = re.compile(r"(?<=:)[^:@/?#\s]+(?=@)")
_ROLE_SCHEMES = frozenset({"postgresql", "postgres", "redis", "rediss", "valkey", "valkeys"})
"""Schemes whose user name alone (no password) names a role, not a secret: it is shown."""
_SECRET_WORDS = ("pass", "pwd", "secret", "token", "key", "auth", "credential", "signature")


def mask(url: str) -> str:
    """``url`` as written, but with its credentials replaced by ``***``: safe for a
    repr, a log line or an error message.

    Everything between ``://`` and the last ``@`` is hidden (a user name before a
    ``:`` is kept, and so is a lone user name in a database URL, where it names the
    role: ``postgresql://reporting@db/app``; elsewhere a lone user may be a token),
    so a password holding ``/``, ``?``, ``#`` or ``@`` that was not percent-encoded
    is hidden too; so is the value of every query parameter whose
    name looks secret (``password``, ``secret``, ``token``, ``key``, ``auth``, ...),
    and a URL inside a query value (``endpoint_url=http://h/?token=...``) is masked
    the same way.
    """
    if not isinstance(url, str):
        return f"<{type(url).__name__}, not a URL>"
    start = url.find("://")
    if start < 0:
        return _USERINFO.sub(_HIDDEN, _mask_query(url))
    start += 3
    at = url.rfind("@", start)
    query = url.find("?", start)
    if at > query >= 0 and "://" in url[query:at]:  # the "@" of a URL in the query
        at = url.rfind("@", start, query)
    if at < 0:
        return url[:start] + _mask_query(url[start:])
    user, colon, _ = url[start:at].partition(":")
    if not _PLAIN_USER.fullmatch(user):
        shown = _HIDDEN
    elif colon:
        shown = f"{user}:{_HIDDEN}"
    else:
        role = url[: start - 3].lower().partition("+")[0] in _ROLE_SCHEMES
        shown = user if role and user else _HIDDEN
    return url[:start] + shown + "@" + _mask_query(url[at + 1 :])


_URL_IN_TEXT = re.compile(r"""[A-Za-z][A-Za-z0-9+.-]*:/{1,2}[^\s'"<>`]+""")


def mask_urls(text: str) -> str:
    """``text`` (a driver's error message, say) with every URL in it masked."""
    return _URL_IN_TEXT.sub(lambda m: mask(m[0]), text)


def _mask_query(text: str) -> str:
    """``text`` with the values of its query's secret-looking parameters hidden."""
    head, sep, query = text.partition("?")
    if not sep:
        return text
    fields = []
    for field in query.split("&"):
        name, eq, value = field.partition("=")
        if eq and _secret(unquote_plus(name)):
            value = _HIDDEN
        elif "://" in unquote_plus(value):
            value = mask(unquote_plus(value))
        fields.append(f"{name}{eq}{value}")
    return f"{head}?{'&'.join(fields)}"


def parse(url: str) -> SplitResult:
    """``urlsplit(url)``, with its host and port checked: any parsing error is a
    one-line ``ConfigurationError`` that shows the URL masked.

    A password holding ``/``, ``?``, ``#`` or ``@`` must be percent-encoded (``%2F``,
    ``%3F``, ``%23``, ``%40``); otherwise the URL's parts are not where they seem,
    and that is what the error says.
    """
    try:
        parts = urlsplit(url)
        _ = parts.hostname, parts.port
    except (ValueError, TypeError, AttributeError) as e:
        raise unparseable(url, e) from None
    return parts


def unparseable(url: object, error: BaseException) -> ConfigurationError:
    """The ``ConfigurationError`` for a URL that failed to parse with ``error``.

    The error's own text is left out: it may quote a piece of the password
    (``Port could not be cast to integer value as 'Xy7'``)."""
    shown = mask(url) if isinstance(url, str) else type(url).__name__
    return ConfigurationError(
        f"world URL {shown} does not parse ({type(error).__name__}); a password "
        "holding / ? # @ or : must be percent-encoded (%2F %3F %23 %40 %3A)"
    )


def split_query(url: str) -> tuple[str, dict[str, str]]:
    """Split ``url`` into the URL without its query and the query as a dict.

    Repeated parameters keep their last value. The port is left to the backend
    (a lenient driver may read ``user:pass/word@host`` where :func:`parse` cannot).
    """
    try:
        query = urlsplit(url).query
    except (ValueError, TypeError, AttributeError) as e:
        raise unparseable(url, e) from None
    params = dict(parse_qsl(query, keep_blank_values=True))
    # Cut the text rather than urlunsplit(): for a scheme urllib does not know,
    # urlunsplit drops the empty authority, so sqlite:////abs/path came back as
    # sqlite://abs/path (a host named "abs").
    return url.split("#", 1)[0].split("?", 1)[0], params


def with_query(url: str, name: str, value: str) -> str:
    """``url`` with its query parameter ``name`` set to ``value`` (replaced if
    present); the rest of the URL is kept as written."""
    base, _, query = url.partition("?")
    params = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != name]
    params.append((name, value))
    return f"{base}?{urlencode(params)}"


def _secret(name: str) -> bool:
    name = name.lower()
    return any(word in name for word in _SECRET_WORDS)
