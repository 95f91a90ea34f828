"""Fixtures for the model adapter tests: a local provider server, a clean environment;
helpers both adapters' tests use."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fxworld.models import Message, Model, ModelEvent, ModelRequest, RetryPolicy, TextDelta
from tests.models.provider_server import ProviderServer

KEY = "sk-test-0123456789abcdefSECRET"

HELLO = ModelRequest(instructions="Be brief.", messages=[Message("user", "Hi")])

_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ADMIN_KEY",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CUSTOM_HEADERS",
    "FXWORLD_GATEWAY_URL",
    "FXWORLD_GATEWAY_KEY",
    "VERCEL_OIDC_TOKEN",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No provider variable from the machine leaks into a test, nor a profile on disk."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ANTHROPIC_CONFIG_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no credentials file of the machine's user
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer(api_key=KEY) as s:
        yield s


@pytest.fixture
def fast_retry() -> RetryPolicy:
    """Short waits so retry tests stay quick; Retry-After still wins."""
    return RetryPolicy(max_attempts=4, max_elapsed=20.0, base_delay=0.05, max_delay=0.2)


async def collect(m: Model, request: ModelRequest = HELLO) -> list[ModelEvent]:
    """Every event ``m`` streams for ``request``."""
    return [event async for event in m.stream(request)]


def texts(events: list[ModelEvent]) -> list[str]:
    """The text deltas among ``events``."""
    return [e.text for e in events if isinstance(e, TextDelta)]
