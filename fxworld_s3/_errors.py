"""The one place where botocore and aiohttp exceptions become fxworld errors (W16).

Every request of the world goes through :func:`classify`, which answers what the
exception means for the call that raised it:

* ``"lost"``: the condition of a conditional write did not hold (HTTP 412
  PreconditionFailed, 409 ConditionalRequestConflict, and 404 on a request with
  ``If-Match``: AWS answers 404 where SeaweedFS answers 412). Another writer won:
  the world re-reads the state and decides again. Never an error for the caller.
* ``"missing"``: a GET or HEAD of a key that does not exist (404 NoSuchKey).
* ``"unchanged"``: a conditional GET whose ``If-None-Match`` held (304).
* ``"transient"``: SlowDown, 500, 503, throttling, a cut or refused connection, a
  timeout. :func:`backoff` gives the wait (exponential, full jitter); the world
  retries within a time budget, then raises ``BackendUnavailable``. Retrying a
  write is safe here because every write is conditional and names itself: a
  retried batch that already landed is recognised by its token (``_world``).
* ``"config"``: no credentials, bad credentials, no such bucket, access denied.
* ``"other"``: anything else, translated into a plain ``WorldError``.

:func:`translate` builds the error the caller sees. Messages carry the S3 error
code and the endpoint, never a credential: the endpoint is masked with
:func:`fxworld.urls.mask` (a ``?token=`` in it too), and so is every URL in
botocore's and aiohttp's own words (:func:`fxworld.urls.mask_urls`: they quote
the request's URL, query included).
"""

from __future__ import annotations

import asyncio
import random
from typing import Literal

import aiohttp
import botocore.exceptions as bx

from fxworld.errors import BackendUnavailable, ConfigurationError, WorldError
from fxworld.urls import mask_urls

__all__ = ["Kind", "classify", "translate", "backoff", "CREDENTIAL_VARIABLES"]

Kind = Literal["lost", "missing", "unchanged", "transient", "config", "other"]

CREDENTIAL_VARIABLES = "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"

_LOST_CODES = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}
_MISSING_CODES = {"NoSuchKey", "404", "NotFound"}
_TRANSIENT_CODES = {
    "SlowDown",
    "InternalError",
    "ServiceUnavailable",
    "RequestTimeout",
    "RequestTimeTooSkewed",
    "Throttling",
    "ThrottlingException",
    "500",
    "502",
    "503",
    "504",
}
_CONFIG_CODES = {
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "NoSuchBucket",
    "AllAccessDisabled",
    "InvalidBucketName",
    "AuthorizationHeaderMalformed",
    "PermanentRedirect",
    "403",
}
_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    bx.EndpointConnectionError,
    bx.ConnectionClosedError,
    bx.ReadTimeoutError,
    bx.ConnectTimeoutError,
    bx.ProxyConnectionError,
    bx.HTTPClientError,
    bx.ResponseStreamingError,
    bx.IncompleteReadError,
    aiohttp.ClientError,
    asyncio.TimeoutError,
    ConnectionError,
    OSError,
)


def _code(exc: bx.ClientError) -> tuple[str, int]:
    error = exc.response.get("Error", {}) or {}
    status = int((exc.response.get("ResponseMetadata", {}) or {}).get("HTTPStatusCode", 0) or 0)
    return str(error.get("Code", "") or status), status


def classify(exc: BaseException, *, if_match: bool = False) -> Kind:
    """What ``exc`` means for the request that raised it (see the module docstring).

    ``if_match``: the request carried ``If-Match`` (so a 404 means the object it
    was conditioned on is gone: the race was lost).
    """
    if isinstance(exc, bx.ClientError):
        code, status = _code(exc)
        if code == "NoSuchBucket":
            return "config"
        if status == 304 or code in ("304", "NotModified"):
            return "unchanged"
        if code in _LOST_CODES or status in (409, 412):
            return "lost"
        if code in _MISSING_CODES or status == 404:
            return "lost" if if_match else "missing"
        if code in _TRANSIENT_CODES or status >= 500 or status == 429:
            return "transient"
        if code in _CONFIG_CODES or status in (301, 403):
            return "config"
        return "other"
    if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError)):
        return "config"
    if isinstance(exc, (bx.NoRegionError, bx.InvalidEndpointConfigurationError)):
        return "config"
    if isinstance(exc, bx.ParamValidationError):
        return "other"
    if isinstance(exc, _CONNECTION_ERRORS):
        return "transient"
    return "other"


def backoff(attempt: int, *, base: float = 0.05, cap: float = 2.0) -> float:
    """Seconds to wait before retry number ``attempt`` (from 0): full jitter."""
    return float(random.uniform(0, min(cap, base * 2**attempt)))


def translate(exc: BaseException, *, what: str, endpoint: str) -> WorldError:
    """The fxworld error for ``exc`` raised while doing ``what`` against ``endpoint``
    (already masked)."""
    if isinstance(exc, WorldError):
        return exc
    kind = classify(exc)
    detail = _detail(exc)
    if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError)):
        return ConfigurationError(
            f"{what}: no S3 credentials found; set {CREDENTIAL_VARIABLES} (or an AWS "
            "profile or instance role)"
        )
    if isinstance(exc, bx.NoRegionError):
        return ConfigurationError(f"{what}: no S3 region; pass region= or set AWS_DEFAULT_REGION")
    if kind == "config":
        return ConfigurationError(f"{what}: {endpoint} refused the request ({detail})")
    if kind == "transient":
        return BackendUnavailable(f"{what}: S3 at {endpoint} is unavailable ({detail})")
    return WorldError(f"{what}: S3 error at {endpoint} ({detail})")


def _detail(exc: BaseException) -> str:
    if isinstance(exc, bx.ClientError):
        code, status = _code(exc)
        message = str((exc.response.get("Error", {}) or {}).get("Message", "") or "")
        return mask_urls(f"{code} {status}: {message}")[:300].strip()
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    return mask_urls(f"{name}: {text}")[:300] if text else name
