"""Input checks every backend runs before any I/O (W15).

Public so that third-party backends reject exactly what first-party ones reject,
with the same error type. Each World method has its whole check here:
:func:`append` (session, entries and keywords), :func:`read_args`,
:func:`list_args` (``list_sessions``),
:func:`delay` (``wake``), :func:`lease` (``take_wake``/``renew_wake``),
:func:`wake_batch` (the ``limit`` of ``take_wakes``), :func:`held` (the lease
given to ``renew_wake``/``finish_wake``), and the constructor and URL options
:func:`namespace`, :func:`max_entry_bytes` and :func:`seconds_option` (a bad
option is a ``ConfigurationError`` on every backend).

Importing this module loads neither the engine nor the web layer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, TypeGuard

from fxworld.errors import (
    ConfigurationError,
    EntryTooLarge,
    Fenced,
    InvalidArgument,
    InvalidEntry,
    InvalidSessionId,
)
from fxworld.jsondata import LARGE_STRING, encode_large
from fxworld.types import Fence, NewEntry, WakeLease

__all__ = [
    "DEFAULT_MAX_ENTRY_BYTES",
    "MAX_DATA_DEPTH",
    "RESERVED_KIND_PREFIX",
    "FENCE_KIND",
    "KEY_SESSION_PREFIX",
    "SEALED_FIELD",
    "session_id",
    "namespace",
    "agent_name",
    "entries",
    "encode_data",
    "append_args",
    "read_args",
    "list_args",
    "last_seq",
    "delay",
    "lease",
    "MAX_WAKE_BATCH",
    "wake_batch",
    "append",
    "held",
    "max_entry_bytes",
    "seconds_option",
]

DEFAULT_MAX_ENTRY_BYTES = 64 * 1024 * 1024
"""The default limit on one entry's encoded data, in bytes (64 MiB): a large value
is saved as one entry, in the world's single atomic write (docs/large-values.md)."""

MAX_DATA_DEPTH = 500
"""How deeply entry data may nest (objects and arrays); deeper is ``InvalidEntry``
on every Python (3.13's json no longer runs out of recursion where 3.11's did)."""

RESERVED_KIND_PREFIX = "fence"
FENCE_KIND = "fence"
"""The kind of the entry ``acquire`` appends; callers may not use it or any kind
starting with it."""

KEY_SESSION_PREFIX = "fxkey."
"""Session ids starting with this hold the data keys of an ``EncryptedWorld``'s
sessions (docs/encryption.md): the EncryptedWorld refuses them to its callers,
and ``fxworld.prune`` of the world that stores them keeps them (deleting one would
crypto-shred a session that may still be in use)."""

SEALED_FIELD = "fxenc"
"""The field that marks an entry's data as sealed by an ``EncryptedWorld`` (its
format version). ``fxworld.prune`` of the world that stores such entries, which
cannot read them, keeps their sessions."""

_SESSION_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_NAMESPACE = re.compile(r"[A-Za-z0-9_-]{1,48}")
_AGENT_NAME = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_MAX_KEY = 256
MAX_SEQ = 2**63 - 1
"""The largest ``after``, ``limit`` or ``expect``: a signed 64-bit integer, so every
backend stores and compares it natively."""
MAX_SECONDS = 100 * 365 * 86400.0
"""The longest wake delay or lease (100 years), so every due time is a datetime."""
MAX_WAKE_BATCH = 1000
"""The most wakes one ``take_wakes`` call may ask for, so that one call's work on
the server (one statement, one script) and its reply stay bounded."""


_DOT_SEGMENTS = (".", "..")


def session_id(value: object) -> str:
    """Return ``value`` if it is a valid session id, else raise ``InvalidSessionId``:
    1..128 characters of ``[A-Za-z0-9._:-]``, and not ``.`` or ``..`` (a path
    segment that a server which normalises paths would map elsewhere)."""
    if not isinstance(value, str) or _SESSION_ID.fullmatch(value) is None:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise InvalidSessionId(f"session id {shown} is not 1..128 characters of [A-Za-z0-9._:-]")
    if value in _DOT_SEGMENTS:
        raise InvalidSessionId(f"session id {value!r} is a path segment ('.' and '..' are refused)")
    return value


def namespace(value: object) -> str:
    """Return ``value`` if it is a valid namespace: 1..48 of ``[A-Za-z0-9_-]``.

    Narrower than a session id so that every backend can use it as a schema, key
    prefix or path segment without quoting.
    """
    if not isinstance(value, str) or _NAMESPACE.fullmatch(value) is None:
        raise InvalidArgument(f"namespace {value!r} is not 1..48 characters of [A-Za-z0-9_-]")
    return value


def agent_name(value: object) -> str:
    """Return ``value`` if it is a valid agent name: 1..64 characters of
    ``[A-Za-z0-9._:-]``; else raise ``InvalidArgument``. A name owns sessions
    (:class:`~fxworld.protocol.AgentRouter`), so every backend can store it, index by
    it and put it in a key without quoting."""
    if not isinstance(value, str) or _AGENT_NAME.fullmatch(value) is None:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise InvalidArgument(f"agent name {shown} is not 1..64 characters of [A-Za-z0-9._:-]")
    return value


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_CONTAINERS = (dict, list, tuple)  # what _unfaithful walks into


def _unfaithful(data: dict[Any, Any]) -> tuple[str | None, bool]:
    """Why ``data`` would not decode from its JSON back to itself (or ``None``), and
    whether it holds a string value of ``jsondata.LARGE_STRING`` characters or more.

    One walk over the containers (no recursion) finds what ``json.dumps`` would
    change silently: a key that is not a string (it becomes one) and a tuple (it
    becomes an array), and nesting deeper than :data:`MAX_DATA_DEPTH`. Values of
    other types are left to the encoder, which refuses them.
    """
    large = False
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DATA_DEPTH:
            return f"entry data is nested more than {MAX_DATA_DEPTH} deep", large
        if isinstance(value, dict):
            for k, child in value.items():
                if not isinstance(k, str):
                    return f"entry data has a key that is not a string: {k!r:.40}", large
                if isinstance(child, _CONTAINERS):
                    stack.append((child, depth + 1))
                elif type(child) is str and len(child) >= LARGE_STRING:
                    large = True
        elif isinstance(value, tuple):
            return "entry data holds a tuple (JSON would make it an array)", large
        else:
            for child in value:
                if isinstance(child, _CONTAINERS):
                    stack.append((child, depth + 1))
                elif type(child) is str and len(child) >= LARGE_STRING:
                    large = True
    return None, large


def encode_data(data: object, *, max_bytes: int = DEFAULT_MAX_ENTRY_BYTES) -> str:
    """Encode entry data as compact JSON, refusing anything that is not a JSON object
    that decodes back to itself, or that is over ``max_bytes`` encoded."""
    if not isinstance(data, dict):
        raise InvalidEntry(f"entry data must be a JSON object (dict), not {type(data).__name__}")
    why, large = _unfaithful(data)
    if why is not None:
        raise InvalidEntry(why)
    try:
        if large:  # its large strings encoded apart, fast (jsondata), sized on the way
            text, size = encode_large(data, _ENCODER)
        else:
            text = _ENCODER.encode(data)
            # ASCII text (O(1) to know) is its own size: no copy of a large value
            size = len(text) if text.isascii() else len(text.encode("utf-8"))
    except (TypeError, ValueError) as e:
        if isinstance(e, UnicodeEncodeError):
            raise InvalidEntry("entry data is not valid Unicode (a lone surrogate?)") from None
        raise InvalidEntry(f"entry data is not JSON: {e}") from None
    except RecursionError:
        raise InvalidEntry("entry data is nested too deeply") from None
    if size > max_bytes:
        raise EntryTooLarge(size, max_bytes)
    return text


def entries(
    items: Sequence[NewEntry], *, max_bytes: int = DEFAULT_MAX_ENTRY_BYTES
) -> list[tuple[str, str]]:
    """Check a batch and return ``(kind, encoded data)`` pairs, or raise before any I/O."""
    if isinstance(items, (str, bytes, NewEntry)) or not isinstance(items, Sequence):
        raise InvalidEntry("entries must be a sequence of NewEntry")
    if not items:
        raise InvalidEntry("append needs at least one entry")
    out: list[tuple[str, str]] = []
    for item in items:
        if not isinstance(item, NewEntry):
            raise InvalidEntry(f"entries must be NewEntry values, not {type(item).__name__}")
        kind = item.kind
        if not isinstance(kind, str) or not 1 <= len(kind) <= 64:
            raise InvalidEntry(f"entry kind {kind!r} must be a string of 1..64 characters")
        if kind.startswith(RESERVED_KIND_PREFIX):
            raise InvalidEntry(f"entry kind {kind!r} is reserved (kinds starting with 'fence')")
        out.append((kind, encode_data(item.data, max_bytes=max_bytes)))
    return out


def append_args(
    sid: str,
    *,
    fence: Fence | None,
    expect: int | None,
    key: str | None,
    wake: float | None,
) -> None:
    """Check ``append``'s keyword arguments (W15)."""
    if fence is not None:
        if not isinstance(fence, Fence):
            raise InvalidArgument(f"fence must be a Fence, not {type(fence).__name__}")
        if fence.session_id != sid:
            # another session's fence is never the newest for this one (W2)
            raise Fenced(sid, fence.epoch, why=f"belongs to session {fence.session_id!r}")
        if not _is_int(fence.epoch) or fence.epoch < 1:
            # acquire hands out epochs from 1: this fence was never the newest (W2)
            raise Fenced(sid, fence.epoch)
    if expect is not None and (not _is_int(expect) or not 0 <= expect <= MAX_SEQ):
        raise InvalidArgument(f"expect must be an integer from 0 to 2**63-1, not {expect!r}")
    if key is not None and (not isinstance(key, str) or not 1 <= len(key) <= _MAX_KEY):
        raise InvalidArgument(f"key must be a string of 1..{_MAX_KEY} characters")
    if wake is not None:
        delay(wake)


def append(
    sid: object,
    items: Sequence[NewEntry],
    *,
    fence: Fence | None = None,
    expect: int | None = None,
    key: str | None = None,
    wake: float | None = None,
    max_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
) -> tuple[str, list[tuple[str, str]]]:
    """``append``'s whole check, before any I/O: the session id, the batch (each
    entry's kind and encoded data, at most ``max_bytes`` each) and the keywords.
    Returns the session id and the ``(kind, encoded data)`` pairs."""
    checked = session_id(sid)
    encoded = entries(items, max_bytes=max_bytes)
    append_args(checked, fence=fence, expect=expect, key=key, wake=wake)
    return checked, encoded


def held(wake: object) -> WakeLease:
    """Check the lease given to ``renew_wake`` or ``finish_wake``: a
    :class:`~fxworld.types.WakeLease` with a valid session id and a non-empty
    token (``InvalidArgument`` before any I/O; whether it is still held is the
    world's to say, with ``LeaseLost``)."""
    if not isinstance(wake, WakeLease):
        raise InvalidArgument(f"expected a WakeLease, not {type(wake).__name__}")
    session_id(wake.session_id)
    if not isinstance(wake.token, str) or not wake.token:
        raise InvalidArgument(f"a WakeLease token is a non-empty string, not {wake.token!r}")
    return wake


def max_entry_bytes(value: object, *, largest: int | None = None, why: str = "") -> int:
    """Check the ``max_entry_bytes`` option (a constructor argument, or the URL's
    text): an integer >= 1, and at most ``largest``, what the world's store can hold
    in one entry (``why`` says what bounds it), else ``ConfigurationError``."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"max_entry_bytes must be an integer >= 1, not {value!r}")
    if largest is not None and value > largest:
        raise ConfigurationError(
            f"max_entry_bytes {value} is over the largest entry this world can hold, "
            f"{largest} bytes ({why}; docs/large-values.md)"
        )
    return value


def seconds_option(name: str, value: object, *, high: float = 3600.0) -> float:
    """Check a constructor or URL option counted in seconds (a timeout, a poll
    interval): a number over 0 and below ``high`` (the URL's text is parsed),
    else ``ConfigurationError``."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < high:
        raise ConfigurationError(
            f"{name} must be a number of seconds in (0, {high:g}), not {value!r}"
        )
    return float(value)


def read_args(after: object, limit: object) -> None:
    """Check ``read``'s cursor and limit."""
    if not _is_int(after) or not 0 <= after <= MAX_SEQ:
        raise InvalidArgument(f"after must be an integer from 0 to 2**63-1, not {after!r}")
    if not _is_int(limit) or not 1 <= limit <= MAX_SEQ:
        raise InvalidArgument(f"limit must be an integer from 1 to 2**63-1, not {limit!r}")


def last_seq(value: object) -> int:
    """Check ``delete_if_idle``'s ``last``: an integer from 1 to 2**63-1."""
    if not _is_int(value) or not 1 <= value <= MAX_SEQ:
        raise InvalidArgument(f"last must be an integer from 1 to 2**63-1, not {value!r}")
    return value


def list_args(after: object, limit: object) -> str:
    """Check ``list_sessions``'s cursor and limit: ``after`` is a string (the last
    id of the page before) and ``limit`` an integer from 1 to 2**63-1, else
    ``InvalidArgument``. Returns ``after``."""
    if not isinstance(after, str):
        raise InvalidArgument(f"after must be a string, not {type(after).__name__}")
    read_args(0, limit)
    return after


def delay(value: object) -> float:
    """Check a wake delay: a number of seconds from 0 to ``MAX_SECONDS``."""
    if not _is_number(value) or not 0 <= value <= MAX_SECONDS:
        raise InvalidArgument(
            f"delay must be a number of seconds from 0 to 100 years, not {value!r}"
        )
    return float(value)


def lease(value: object) -> float:
    """Check a lease: a number of seconds over 0, up to ``MAX_SECONDS``."""
    if not _is_number(value) or not 0 < value <= MAX_SECONDS:
        raise InvalidArgument(
            f"lease must be a number of seconds over 0, up to 100 years, not {value!r}"
        )
    return float(value)


def wake_batch(limit: object) -> int:
    """Check the ``limit`` of ``take_wakes``: an integer from 1 to :data:`MAX_WAKE_BATCH`."""
    if not _is_int(limit) or not 1 <= limit <= MAX_WAKE_BATCH:
        raise InvalidArgument(f"limit must be an integer from 1 to {MAX_WAKE_BATCH}, not {limit!r}")
    return limit


def _is_int(value: object) -> TypeGuard[int]:
    """Whether ``value`` is an integer, not a ``bool``; narrows it for the checks after."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is an integer or a float, not a ``bool``; narrows it likewise."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
