"""The one place where redis-py exceptions become fxworld errors (W16).

Two questions are answered here for every driver exception:

* :func:`retry_safe`: may the world run the call again by itself? Always when the
  server refused it before running it: ``NOSCRIPT`` (reloaded first), ``LOADING``
  (restarting from its AOF), ``CLUSTERDOWN``, ``TRYAGAIN``, ``MOVED``/``ASK`` (redis-py
  reloads the slot map), ``READONLY`` (a replica after a failover), ``OOM``,
  ``BUSY``, or a connection that could not be opened. When the connection broke or
  timed out *after* the script was sent, it may or may not have run, so only calls
  that are idempotent by construction run again (reads, keyed appends, wake,
  renew, delete, setup); the others surface as ``BackendUnavailable``: a fenced
  append of unknown outcome is the caller's to check (the engine reads the log).
* :func:`translate`: which fxworld error the caller sees. A lost, restarting or
  refusing server is ``BackendUnavailable``; bad credentials or a server that does
  not run the scripts (too old, a cluster reached as one server) are
  ``ConfigurationError``; anything else is a plain ``WorldError``. No driver
  exception reaches the caller, and no message carries a credential.
"""

from __future__ import annotations

import redis.exceptions as rex

from fxworld.errors import BackendUnavailable, ConfigurationError, WorldError
from fxworld.urls import mask, mask_urls

__all__ = [
    "retry_safe",
    "translate",
    "refused_unrun",
    "needs_reload",
    "never_sent",
    "config_disabled",
    "tls_unanswered",
]

# Replies that mean "not run, try again" (the server names the reason first).
_UNRUN_PREFIXES = (
    "LOADING",
    "CLUSTERDOWN",
    "TRYAGAIN",
    "MOVED",
    "ASK",
    "READONLY",
    "OOM",
    "BUSY",
    "MASTERDOWN",
    "NOREPLICAS",
)
_CONNECT_ERRORS = (rex.ConnectionError, rex.TimeoutError, OSError, TimeoutError)


def needs_reload(exc: BaseException) -> bool:
    """The server lost the script (restart, failover, ``SCRIPT FLUSH``): load it again."""
    return isinstance(exc, rex.NoScriptError) or str(exc).startswith("NOSCRIPT")


def never_sent(exc: BaseException) -> bool:
    """The connection could not be opened: the call never left the client."""
    if isinstance(exc, rex.MaxConnectionsError):
        return True
    text = str(exc)
    return isinstance(exc, rex.ConnectionError | rex.TimeoutError) and (
        "connecting to" in text or "Timeout connecting" in text
    )


def tls_unanswered(exc: BaseException, url: str) -> bool:
    """A ``rediss://`` connection timed out while it opened: most often a plain
    (non-TLS) server, which waits for a command while the client waits for the TLS
    handshake. Not retried: it would only wait the same way again."""
    return (
        url.partition("://")[0].lower() == "rediss"
        and isinstance(exc, rex.TimeoutError | TimeoutError)
        and never_sent(exc)
    )


def config_disabled(exc: BaseException) -> bool:
    """``CONFIG`` is renamed away or not allowed (managed services)."""
    return isinstance(exc, rex.NoPermissionError) or (
        isinstance(exc, rex.ResponseError)
        and ("unknown command" in str(exc) or str(exc).startswith("NOPERM"))
    )


def refused_unrun(exc: BaseException) -> bool:
    """The server (or the cluster client) refused the call without running it."""
    if isinstance(exc, rex.BusyLoadingError | rex.NoScriptError):
        return True
    if isinstance(
        exc,
        rex.ReadOnlyError
        | rex.OutOfMemoryError
        | rex.TryAgainError
        | rex.ClusterDownError
        | rex.AskError
        | rex.SlotNotCoveredError,
    ):
        return True
    return isinstance(exc, rex.ResponseError) and str(exc).startswith(_UNRUN_PREFIXES)


def _lost(exc: BaseException) -> bool:
    """The connection broke or timed out: the call's outcome is unknown."""
    return isinstance(exc, (*_CONNECT_ERRORS, rex.ClusterError)) and not (
        isinstance(exc, rex.AuthenticationError | rex.AuthorizationError)
    )


def retry_safe(exc: BaseException, *, sent: bool, idempotent: bool) -> bool:
    """May the world run the call that raised ``exc`` again?

    ``sent``: the call may have reached the server. ``idempotent``: running it twice
    has the effect of running it once.
    """
    if refused_unrun(exc):
        return True
    if not _lost(exc):
        return False  # the server answered: an error, not a transient loss
    return idempotent or not sent


def translate(exc: BaseException, *, what: str, url: str) -> WorldError:
    """The fxworld error for driver exception ``exc`` raised while doing ``what``."""
    if isinstance(exc, WorldError):
        return exc
    detail = _detail(exc)
    if isinstance(exc, rex.AuthenticationError | rex.AuthorizationError | rex.NoPermissionError):
        return ConfigurationError(f"{what}: Redis refused the credentials or command ({detail})")
    if tls_unanswered(exc, url):
        return BackendUnavailable(
            f"{what}: Redis at {mask(url)} did not answer the TLS handshake ({detail}); "
            "rediss:// is TLS: if the server is plain Redis, TLS may be the cause (use redis://)"
        )
    if refused_unrun(exc) or _lost(exc):
        return BackendUnavailable(f"{what}: Redis at {mask(url)} is unavailable ({detail})")
    text = str(exc)
    if "unknown command" in text or "CROSSSLOT" in text or "ERR Error running script" in text:
        return ConfigurationError(
            f"{what}: the Redis server cannot run fxworld's scripts ({detail}); "
            "it needs Redis 6.2 or newer, and ?cluster=true for a Redis Cluster"
        )
    return WorldError(f"{what}: Redis error ({detail})")


def _detail(exc: BaseException) -> str:
    """The driver's first line, with any URL in it masked (W16)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    return mask_urls(f"{name}: {text}")[:300] if text else name
