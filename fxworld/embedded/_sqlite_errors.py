"""The one place where ``sqlite3`` exceptions become fxworld errors (W16).

Every call into the ``sqlite3`` driver made by :mod:`fxworld.embedded.sqlite` runs
through :func:`translate`, so no driver exception reaches a caller. A busy or
locked database that stays so beyond the busy timeout and the bounded retries
becomes :class:`~fxworld.errors.BackendUnavailable` (transient: safe to retry, with
the same idempotency key for an append). A write refused because the world is
read-only (``mode=ro``, or a file this process may not write) is a
:class:`~fxworld.errors.ConfigurationError`: retrying would not help.
"""

from __future__ import annotations

import sqlite3

from fxworld.errors import BackendUnavailable, ConfigurationError, WorldError

__all__ = ["is_busy", "translate", "translate_os"]

_BUSY_CODES = {
    getattr(sqlite3, name)
    for name in ("SQLITE_BUSY", "SQLITE_LOCKED")
    if isinstance(getattr(sqlite3, name, None), int)
}

_NOT_A_DATABASE = ("file is not a database", "file is encrypted")
_READONLY = 8  # SQLITE_READONLY


def _code(error: BaseException) -> int | None:
    """SQLite's primary result code of ``error``, when the driver gives it."""
    code = getattr(error, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_busy(error: BaseException) -> bool:
    """True if ``error`` says another connection holds the lock (worth a retry)."""
    if not isinstance(error, sqlite3.OperationalError):
        return False
    if _code(error) in _BUSY_CODES:
        return True
    text = str(error).lower()
    return "locked" in text or "busy" in text


def translate(error: sqlite3.Error, *, path: str, doing: str) -> WorldError:
    """The fxworld error for a ``sqlite3`` error raised while ``doing`` on ``path``."""
    text = str(error)
    where = f"sqlite world {path!r}: {doing}"
    if is_busy(error):
        return BackendUnavailable(f"{where}: the database stayed locked by another writer ({text})")
    if isinstance(error, sqlite3.DatabaseError) and any(
        phrase in text.lower() for phrase in _NOT_A_DATABASE
    ):
        return ConfigurationError(f"{where}: the file is not an fxworld SQLite database ({text})")
    if _code(error) == _READONLY or "readonly database" in text.lower():
        # mode=ro, or a file or directory this process may not write: not transient
        return ConfigurationError(f"{where}: the world is read-only here ({text})")
    if isinstance(error, sqlite3.OperationalError):
        # unable to open, disk I/O error, disk full, read-only file system, ...
        return BackendUnavailable(f"{where}: {text}")
    if isinstance(error, sqlite3.IntegrityError):
        return WorldError(f"{where}: integrity error, the database may be damaged ({text})")
    return WorldError(f"{where}: {type(error).__name__}: {text}")


def translate_os(error: OSError, *, path: str, doing: str) -> WorldError:
    """The fxworld error for an ``OSError`` (creating the file's directory, say)."""
    return BackendUnavailable(
        f"sqlite world {path!r}: {doing}: {error.strerror or type(error).__name__}"
    )
