"""What the provider adapters (``AnthropicModel``, ``OpenAIModel``) share: loading
their SDK on first use, closing a client, and the parts of their error boundary
that do not depend on the provider (every message passes through
:func:`~fxworld.models._retry.scrub`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from fxworld.errors import ConfigurationError
from fxworld.models._retry import (
    RetryableModelError,
    retry_after_seconds,
    scrub,
    should_retry_status,
)
from fxworld.models.base import ModelError

__all__ = [
    "first_client",
    "close_client",
    "connection_error",
    "import_sdk",
    "other_error",
    "status_error",
]


def import_sdk(module: str, provider: str) -> Any:
    """The SDK ``module`` (installed by the extra of the same name), or a
    :class:`ConfigurationError` that says how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigurationError(
            f"the {provider} adapter needs the {module} SDK: pip install 'fxworld[{module}]'"
        ) from None


C = TypeVar("C")


def first_client(
    make: Callable[[], C], name: str, secrets: Iterable[str | None], hint: str = ""
) -> C:
    """``make()``, the model's first client, made when the model is built so that the
    SDK reads the environment and checks its options then, not mid-turn. What it
    raises becomes a :class:`ConfigurationError`, raised outside the ``except``
    block so that the SDK's exception (whose message may quote the key) is not
    even kept as ``__context__``."""
    try:
        return make()
    except Exception as e:
        failure = ConfigurationError(scrub(f"model {name!r}: {e}{hint}", secrets))
    raise failure


async def close_client(client: Any) -> None:
    """Close an SDK client (what :class:`~fxworld.models._loop.PerLoop` calls)."""
    await client.close()


def status_error(
    name: str,
    label: str,
    detail: str,
    status: int,
    headers: Mapping[str, str] | None,
    secrets: Iterable[str | None],
) -> ModelError:
    """An HTTP error status (or an error event standing for one), retryable when
    the status (or ``x-should-retry``) says so."""
    message = scrub(f"{name}: {label}: {detail}", secrets)
    if should_retry_status(status, headers):
        return RetryableModelError(message, status=status, retry_after=retry_after_seconds(headers))
    return ModelError(message, retryable=False, status=status)


def connection_error(
    name: str, where: str, detail: str, secrets: Iterable[str | None], *, streaming: bool
) -> RetryableModelError:
    """The endpoint ``where`` could not be reached, or its stream broke."""
    text = (
        f"{name}: the stream from {where} broke: {detail}"
        if streaming
        else f"{name}: could not reach {where}: {detail}"
    )
    return RetryableModelError(scrub(text, secrets))


def other_error(name: str, e: BaseException, secrets: Iterable[str | None]) -> ModelError:
    """An error that is not the SDK's own: a malformed chunk or a broken
    transport is retryable, anything else is not."""
    if isinstance(e, ValueError):  # json.JSONDecodeError: a malformed chunk
        return RetryableModelError(scrub(f"{name}: malformed chunk in the stream: {e}", secrets))
    if isinstance(e, OSError | EOFError) or _is_transport_error(e):
        return RetryableModelError(
            scrub(f"{name}: the stream broke: {type(e).__name__}: {e}", secrets)
        )
    return ModelError(
        scrub(f"{name}: unexpected {type(e).__name__}: {e}", secrets), retryable=False
    )


def _is_transport_error(e: BaseException) -> bool:
    try:
        import httpx2
    except ImportError:  # pragma: no cover - the SDKs depend on it
        return False
    return isinstance(e, httpx2.TransportError | httpx2.StreamError)
