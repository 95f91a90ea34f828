"""World URLs: parsing the common parts and masking credentials (W16).

Public so that every backend's ``from_url`` reads ``?namespace=`` the same way and
never shows a password.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["mask", "split_query"]


def mask(url: str) -> str:
    """``url`` with any password (and any ``secret``/``key``/``token`` query value)
    replaced by ``***``: safe for a repr, a log line or an error message."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{host}" if ":" in userinfo else f"{user}@{host}"
    query = [
        (k, "***" if _secret(k) else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
    ]
    if netloc == parts.netloc:
        # Nothing to hide before the query: keep the text as written (urlunsplit
        # would turn sqlite:////abs/path into sqlite://abs/path).
        head = url.split("#", 1)[0].split("?", 1)[0]
        masked = f"{head}?{urlencode(query, safe='*/:')}" if query else head
    else:
        masked = urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, safe="*/:"), ""))
    # A "user:password@" that urllib did not parse as an authority (no scheme, a
    # missing slash: "postgresql:/u:pw@host") is still hidden.
    return _USERINFO.sub("***", masked)


def split_query(url: str) -> tuple[str, dict[str, str]]:
    """Split ``url`` into the URL without its query and the query as a dict.

    Repeated parameters keep their last value.
    """
    parts = urlsplit(url)
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    # Cut the text rather than urlunsplit(): for a scheme urllib does not know,
    # urlunsplit drops the empty authority, so sqlite:////abs/path came back as
    # sqlite://abs/path (a host named "abs").
    return url.split("#", 1)[0].split("?", 1)[0], params


_USERINFO = re.compile(r"(?<=:)[^:@/?#\s]+(?=@)")


def _secret(name: str) -> bool:
    name = name.lower()
    return (
        any(word in name for word in ("password", "secret", "token", "key")) and name != "namespace"
    )
