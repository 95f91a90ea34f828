"""The one place where asyncpg and SQLAlchemy exceptions become fxworld errors (W16).

Two questions are answered here for every driver exception:

* :func:`retry_safe`: may the world retry the call by itself? Always when the call
  never reached the server (the pool could not connect, the connection was found
  closed before sending) or the server rolled it back for a retryable reason
  (serialization failure, deadlock). When the connection was lost *after* the call
  was sent, the call may or may not have committed, so only calls that are
  idempotent by construction are retried (reads, keyed appends, wake, renew,
  delete, setup); the others surface as ``BackendUnavailable``.
* :func:`translate`: which fxworld error the caller sees. The refusals raised by the
  plpgsql functions carry custom SQLSTATEs (see ``_schema``) and become ``Fenced``,
  ``Conflict`` and ``LeaseLost``; a lost or unreachable server becomes
  ``BackendUnavailable``; a namespace never set up, bad credentials or a missing
  database become ``ConfigurationError``; data PostgreSQL refuses becomes
  ``InvalidEntry``. Anything else is a plain ``WorldError``: no driver exception
  ever reaches the caller, and no message carries a credential.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import asyncpg
import sqlalchemy.exc

from fxworld.errors import (
    BackendUnavailable,
    ConfigurationError,
    Conflict,
    Fenced,
    InvalidArgument,
    InvalidEntry,
    LeaseLost,
    WorldError,
)
from fxworld.urls import mask_urls
from fxworld_postgres import _schema

__all__ = ["translate", "retry_safe", "connection_broken", "NotSent"]

# SQLSTATE classes and codes
_TRANSIENT_CLASSES = ("08", "53", "57", "40")  # connection, resources, operator, rollback
_RETRY_ROLLED_BACK = ("40001", "40P01")  # serialization failure, deadlock: rolled back
_NOT_SET_UP = ("42P01", "42883", "3F000")  # undefined table / function, no such schema
_BAD_DATA = ("22P05", "22021", "22P02", "54000")  # untranslatable char, bad text, too big
_CONFIG_CLASSES = ("28", "3D")  # authentication, no such database


class NotSent(Exception):
    """Raised by the world when a pooled connection was found closed before use."""


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps (SQLAlchemy ``.orig``, ``__cause__``, ``__context__``)."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        e = todo.pop(0)
        if id(e) in seen or len(seen) > 8:
            continue
        seen.add(id(e))
        yield e
        orig = getattr(e, "orig", None)
        if isinstance(orig, BaseException):
            todo.append(orig)
        if e.__cause__ is not None:
            todo.append(e.__cause__)
        if e.__context__ is not None:
            todo.append(e.__context__)


def _sqlstate(exc: BaseException) -> str | None:
    for e in _chain(exc):
        state = getattr(e, "sqlstate", None)
        if isinstance(state, str) and len(state) == 5:
            return state
    return None


def _driver_error(exc: BaseException) -> BaseException:
    """The innermost asyncpg (or OS) exception behind ``exc``, else ``exc``."""
    for e in _chain(exc):
        if isinstance(e, (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)):
            return e
    return exc


def connection_broken(exc: BaseException) -> bool:
    """True if the connection that raised ``exc`` must not go back to the pool."""
    if isinstance(exc, (asyncio.CancelledError, TimeoutError, NotSent)):
        return True
    state = _sqlstate(exc)
    if state is not None:
        return state[:2] in ("08", "57")
    return any(
        isinstance(e, (asyncpg.InterfaceError, OSError, sqlalchemy.exc.DisconnectionError))
        for e in _chain(exc)
    )


def _unreachable(exc: BaseException) -> bool:
    state = _sqlstate(exc)
    if state is not None:
        return state[:2] in _TRANSIENT_CLASSES
    return any(
        isinstance(
            e,
            (
                asyncpg.InterfaceError,
                OSError,
                TimeoutError,
                sqlalchemy.exc.DisconnectionError,
                sqlalchemy.exc.TimeoutError,
                sqlalchemy.exc.InterfaceError,
                sqlalchemy.exc.OperationalError,
            ),
        )
        for e in _chain(exc)
    )


def not_set_up(exc: BaseException) -> bool:
    """The namespace's schema or functions do not exist yet: nothing was done, and
    the call can run again once ``setup()`` created them."""
    return _sqlstate(exc) in _NOT_SET_UP


def retry_safe(exc: BaseException, *, sent: bool, idempotent: bool) -> bool:
    """May the world retry the call that raised ``exc``?

    ``sent``: the call may have reached the server. ``idempotent``: running the
    call twice has the effect of running it once.
    """
    if isinstance(exc, NotSent):
        return True
    state = _sqlstate(exc)
    if state in _RETRY_ROLLED_BACK:
        return True
    if state is not None and state[:2] not in ("08", "57", "53"):
        return False  # the server answered: a refusal or an error, not a transient loss
    if not _unreachable(exc):
        return False
    if not sent:
        return state is None or state in ("57P03", "53300") or state[:2] == "08"
    return idempotent


def translate(
    exc: BaseException,
    *,
    what: str,
    session_id: str | None = None,
    epoch: int | None = None,
    expected: int | None = None,
) -> WorldError:
    """The fxworld error for driver exception ``exc`` raised while doing ``what``."""
    if isinstance(exc, WorldError):
        return exc
    state = _sqlstate(exc)
    driver = _driver_error(exc)
    detail = _detail(driver)
    if state == _schema.FENCED:
        return Fenced(session_id or "?", epoch if epoch is not None else -1, _int(driver))
    if state == _schema.CONFLICT:
        last = _int(driver)
        return Conflict(
            session_id or "?",
            expected if expected is not None else -1,
            -1 if last is None else last,
        )
    if state == _schema.LEASE_LOST:
        return LeaseLost(f"session {session_id!r}: the lease is no longer held")
    if state in _NOT_SET_UP:
        return ConfigurationError(
            f"{what}: the namespace is not set up ({detail}); run `await world.setup()` "
            "or `fxworld setup --world URL` first"
        )
    if state in _BAD_DATA:
        return InvalidEntry(f"{what}: PostgreSQL refused the data ({detail})")
    if state is not None and state[:2] == "22":
        return InvalidArgument(f"{what}: an argument is out of PostgreSQL's range ({detail})")
    if state is not None and state[:2] in _CONFIG_CLASSES:
        return ConfigurationError(f"{what}: PostgreSQL refused the connection ({detail})")
    if isinstance(exc, NotSent) or _unreachable(exc):
        return BackendUnavailable(f"{what}: PostgreSQL is unavailable ({detail})")
    if isinstance(driver, (TypeError, ValueError)) and state is None:
        return ConfigurationError(f"{what}: bad connection options ({detail})")
    return WorldError(f"{what}: PostgreSQL error ({detail})")


def _detail(exc: BaseException) -> str:
    """The driver's first line, with any URL in it masked (W16)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    return mask_urls(f"{name}: {text}")[:300] if text else name


def _int(exc: BaseException) -> int | None:
    try:
        return int(getattr(exc, "detail", None) or "")
    except ValueError:
        return None
