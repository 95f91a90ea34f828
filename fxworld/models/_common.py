"""What the provider adapters (``AnthropicModel``, ``OpenAIModel``) share: their
base class :class:`ProviderModel` (the SDK loaded on first use, the settings of
every request, one client per event loop, the retries), the parse of a tool
call's JSON input, and the parts of their error boundary that do not depend on
the provider (every message passes through :func:`~fxworld.models._retry.scrub`)."""

from __future__ import annotations

import importlib
import json
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from typing import Any, ClassVar, TypeVar

from fxworld.errors import ConfigurationError
from fxworld.models._loop import PerLoop
from fxworld.models._retry import (
    RetryableModelError,
    RetryPolicy,
    retry_after_seconds,
    scrub,
    should_retry_status,
    stream_with_retries,
)
from fxworld.models.base import ModelError, ModelEvent, ModelRequest

__all__ = [
    "ProviderModel",
    "call_input",
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


class ProviderModel(ABC):
    """A model behind a provider's SDK: what both adapters hold and do alike.

    A subclass names its SDK (``sdk``, the extra of the same name), the SDK's async
    client class (``client_class``) and its provider; it builds its first client in
    its own ``__init__`` (:func:`first_client`, then :meth:`_keep_clients`), and
    implements :meth:`_attempt` (one request, its events) and :meth:`_translate`
    (its SDK's errors).
    """

    sdk: ClassVar[str]
    client_class: ClassVar[str]
    provider: ClassVar[str]

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None,
        name: str | None,
        temperature: float | None,
        timeout: float,
        retry: RetryPolicy | None,
        default_headers: Mapping[str, str] | None,
        extra_body: Mapping[str, Any] | None,
    ) -> None:
        if not model:
            raise ConfigurationError(f"{type(self).__name__} needs a model id")
        self._sdk = import_sdk(self.sdk, self.provider)
        self.model = model
        self.name = name or f"{self.sdk}/{model}"
        self._api_key = api_key
        self._base_url = base_url
        self._temperature = temperature
        self._timeout = timeout
        self._retry = retry or RetryPolicy()
        self._headers = dict(default_headers or {})
        self._extra_body = dict(extra_body or {})

    def _client_key(self) -> Any:
        """What the SDK's client gets as ``api_key`` (a subclass may give a function)."""
        return self._api_key

    def _new_client(self) -> Any:
        return getattr(self._sdk, self.client_class)(
            api_key=self._client_key(),
            base_url=self._base_url,
            timeout=self._timeout,
            max_retries=0,  # ours run instead (fxworld.models._retry)
            default_headers=self._headers or None,
        )

    def _keep_clients(self, first: Any) -> None:
        """From now on, one client per event loop, ``first`` the first loop's."""
        self._clients: PerLoop[Any] = PerLoop(self._new_client, close_client, first=first)

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop, if any (clients are
        also closed when their loop shuts down)."""
        await self._clients.aclose()

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return stream_with_retries(lambda: self._attempt(request), self._retry)

    async def _open(self, create: Any, **body: Any) -> Any:
        """``await create(**body)``: the request, its stream not yet read. Its error
        is raised outside the ``except`` block, so that the SDK's exception (whose
        message may quote the key) is not even kept as ``__context__``."""
        failure: ModelError
        try:
            return await create(**body, extra_body=self._extra_body or None)
        except Exception as e:
            failure = self._translate(e)
        raise failure

    @abstractmethod
    def _attempt(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        """One request and its streamed events, ending with the ``ModelResponse``."""

    @abstractmethod
    def _translate(self, e: BaseException, *, streaming: bool = False) -> ModelError:
        """The one boundary where the SDK's and the transport's errors become
        ``ModelError``."""


def call_input(model: str, tool: str, raw: str, *, cut: bool) -> Any:
    """The JSON input of tool call ``tool`` as the model streamed it (``{}`` when
    empty). Not JSON, or not an object: retryable, unless the reply was
    ``cut`` at its token limit, where asking again would cut it again."""
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        if cut:
            raise ModelError(
                f"{model}: the reply reached its token limit inside tool call {tool!r}: "
                "give the model a higher max_tokens",
                retryable=False,
            ) from None
        raise RetryableModelError(
            f"{model}: the input of tool call {tool!r} is not valid JSON"
        ) from None
    if not isinstance(parsed, dict):
        raise RetryableModelError(f"{model}: the input of tool call {tool!r} is not a JSON object")
    return parsed


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
