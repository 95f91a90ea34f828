"""Model strings: ``Agent(model="provider/model")`` to a :class:`Model`.

1. A gateway, when configured (``gateway_url=``/``gateway_key=`` or the
   environment's ``FXWORLD_GATEWAY_URL`` and ``FXWORLD_GATEWAY_KEY``): every model
   string goes through it as an OpenAI-compatible endpoint, the whole string
   being the model id (``"anthropic/claude-opus-5.5"``).
   On Vercel, with no gateway key: when ``VERCEL_OIDC_TOKEN`` is present, every
   model string goes to Vercel's AI Gateway (:data:`VERCEL_GATEWAY_URL`, or
   ``FXWORLD_GATEWAY_URL`` when set) with the deployment's OIDC token as its key
   (read with the ``vercel-oidc`` package, extra ``fxworld[vercel]``; without it,
   the variable itself), so there is no key to set. The token is read again for
   every model request, never kept: Vercel refreshes it (Vercel's Python runtime
   may make each request's ``x-vercel-oidc-token`` the ``vercel.headers``
   context; the wake route never does: it takes no credential from a caller), so
   an instance that lives longer than one token never sends an expired one.
2. Otherwise the provider prefix chooses the adapter: ``anthropic/…`` is
   :class:`~fxworld.models.anthropic.AnthropicModel`, ``openai/…`` is
   :class:`~fxworld.models.openai.OpenAIModel`; each SDK reads its own standard
   variables (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``, ``OPENAI_API_KEY``,
   ``OPENAI_BASE_URL``: the latter covers vLLM, Ollama, a LiteLLM proxy).

Everything that can be wrong (an unknown provider, a missing extra, a missing
key) raises :class:`~fxworld.errors.ConfigurationError` here, when the agent is
built, with what to install or set; never in the middle of a turn. The SDKs are
imported here, on use, never by ``import fxworld``.
"""

from __future__ import annotations

import os
from typing import Any

from fxworld.errors import ConfigurationError
from fxworld.models.base import Model, ModelError

__all__ = [
    "resolve_model",
    "PROVIDERS",
    "GATEWAY_URL_ENV",
    "GATEWAY_KEY_ENV",
    "OIDC_TOKEN_ENV",
    "VERCEL_GATEWAY_URL",
    "vercel_oidc_token",
]

GATEWAY_URL_ENV = "FXWORLD_GATEWAY_URL"
GATEWAY_KEY_ENV = "FXWORLD_GATEWAY_KEY"
PROVIDERS = ("anthropic", "openai")
OIDC_TOKEN_ENV = "VERCEL_OIDC_TOKEN"
VERCEL_GATEWAY_URL = "https://ai-gateway.vercel.sh/v1"
"""Vercel's AI Gateway, OpenAI-compatible: where model strings go on Vercel."""


def resolve_model(
    name: str,
    *,
    gateway_url: str | None = None,
    gateway_key: str | None = None,
    **options: Any,
) -> Model:
    """The model a string names.

    ``options`` go to the adapter's constructor (``api_key``, ``base_url``,
    ``max_tokens``, ``temperature``, ``timeout``, ``retry``, ...). Raises
    ``ConfigurationError`` when it cannot be built (unknown provider, missing
    extra, missing key).
    """
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError(
            "a model string is 'provider/model', e.g. 'anthropic/claude-opus-5.5'"
        )
    url = gateway_url or os.environ.get(GATEWAY_URL_ENV) or None
    key = gateway_key or os.environ.get(GATEWAY_KEY_ENV) or None
    if key is None and os.environ.get(OIDC_TOKEN_ENV):  # on Vercel: no key to set
        from fxworld.models.openai import OpenAIModel

        url = url or VERCEL_GATEWAY_URL
        return OpenAIModel(name, api_key=vercel_oidc_token, base_url=url, name=name, **options)
    if url is not None:
        if key is None:
            raise ConfigurationError(
                f"model {name!r}: a gateway is configured but has no key: set "
                f"{GATEWAY_KEY_ENV} (or pass gateway_key=)"
            )
        from fxworld.models.openai import OpenAIModel

        return OpenAIModel(name, api_key=key, base_url=url, name=name, **options)
    if key is not None:
        raise ConfigurationError(
            f"model {name!r}: {GATEWAY_KEY_ENV} is set but {GATEWAY_URL_ENV} is not: set "
            "the gateway's URL too (or unset the key to call the provider directly)"
        )
    provider, sep, model = name.partition("/")
    if not sep or not provider or not model:
        raise ConfigurationError(
            f"model {name!r}: a model string is 'provider/model' (providers: "
            f"{', '.join(PROVIDERS)}), e.g. 'anthropic/claude-opus-5.5'"
        )
    if provider == "anthropic":
        from fxworld.models.anthropic import AnthropicModel

        return AnthropicModel(model, name=name, **options)
    if provider == "openai":
        from fxworld.models.openai import OpenAIModel

        return OpenAIModel(model, name=name, **options)
    raise ConfigurationError(
        f"model {name!r}: unknown provider {provider!r} (known: {', '.join(PROVIDERS)}); "
        f"to reach any other model, set {GATEWAY_URL_ENV} and {GATEWAY_KEY_ENV} to an "
        "OpenAI-compatible gateway"
    )


async def vercel_oidc_token() -> str:
    """The deployment's OIDC token, now: by the ``vercel-oidc`` package when
    installed (the current request's ``x-vercel-oidc-token``, or the freshest
    unexpired one it saw, else ``$VERCEL_OIDC_TOKEN``), else the variable as it
    is now. A ``ModelError`` when there is none."""
    token: str | None = None
    try:
        from vercel.oidc.aio import get_vercel_oidc_token
    except ImportError:
        pass
    else:
        try:
            token = str(await get_vercel_oidc_token())
        except Exception:  # expired and not refreshable here: the variable as it is
            token = None
    token = token or os.environ.get(OIDC_TOKEN_ENV) or None
    if token is None:
        raise ModelError(
            f"no Vercel OIDC token: the request has no x-vercel-oidc-token and "
            f"{OIDC_TOKEN_ENV} is not set (is OIDC enabled for the project?)",
            retryable=False,
        )
    return token
