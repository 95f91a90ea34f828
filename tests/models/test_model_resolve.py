"""Model strings, gateway routing, configuration errors, and lazy SDK imports."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from fxworld import Agent
from fxworld.errors import ConfigurationError
from fxworld.models import (
    AnthropicModel,
    Message,
    ModelRequest,
    ModelResponse,
    OpenAIModel,
    resolve_model,
)
from tests.models.conftest import KEY
from tests.models.provider_server import ProviderServer, Sse, openai_stream


async def test_gateway_takes_every_model_string_as_the_model_id(
    server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FXWORLD_GATEWAY_URL", server.url + "/v1")
    monkeypatch.setenv("FXWORLD_GATEWAY_KEY", KEY)
    model = resolve_model("anthropic/claude-opus-5.5")
    assert isinstance(model, OpenAIModel)
    assert model.name == "anthropic/claude-opus-5.5"
    server.queue(Sse(openai_stream(["via the gateway"])))
    events = [e async for e in model.stream(ModelRequest("", [Message("user", "hi")]))]
    assert isinstance(events[-1], ModelResponse) and events[-1].text == "via the gateway"
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == "anthropic/claude-opus-5.5"
    assert sent.headers["Authorization"] == f"Bearer {KEY}"
    # Any string goes through a gateway, even a provider fxworld has no adapter for.
    assert resolve_model("google/gemini-9").name == "google/gemini-9"


def test_gateway_from_arguments_wins_and_needs_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    model = resolve_model("openai/gpt-x", gateway_url="http://127.0.0.1:9/v1", gateway_key="k-1")
    assert isinstance(model, OpenAIModel) and model.model == "openai/gpt-x"
    assert model.base_url == "http://127.0.0.1:9/v1"
    with pytest.raises(ConfigurationError, match="FXWORLD_GATEWAY_KEY"):
        resolve_model("openai/gpt-x", gateway_url="http://127.0.0.1:9/v1")
    monkeypatch.setenv("FXWORLD_GATEWAY_KEY", "k-2")
    with pytest.raises(ConfigurationError, match="FXWORLD_GATEWAY_URL"):
        resolve_model("openai/gpt-x")


def test_provider_prefix_chooses_the_adapter_with_the_sdks_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env-key-000000000000")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key-00000000000000000")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8/v1")
    claude = resolve_model("anthropic/claude-opus-5.5")
    assert isinstance(claude, AnthropicModel)
    assert (claude.name, claude.model) == ("anthropic/claude-opus-5.5", "claude-opus-5.5")
    assert claude.base_url.startswith("http://127.0.0.1:9")
    gpt = resolve_model("openai/gpt-5")
    assert isinstance(gpt, OpenAIModel)
    assert (gpt.name, gpt.model, gpt.base_url) == ("openai/gpt-5", "gpt-5", "http://127.0.0.1:8/v1")
    for m in (claude, gpt):
        assert "env-key" not in repr(m)


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("anthropic/claude-opus-5.5", "ANTHROPIC_API_KEY"),
        ("openai/gpt-5", "OPENAI_API_KEY"),
        ("mistral/large", "unknown provider 'mistral'"),
        ("claude-opus-5.5", "'provider/model'"),
        ("", "'provider/model'"),
    ],
)
def test_agent_build_fails_at_once_saying_what_to_set(name: str, needle: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Agent(name)
    assert needle in str(caught.value)


def test_unknown_provider_points_at_the_gateway() -> None:
    with pytest.raises(ConfigurationError, match="FXWORLD_GATEWAY_URL"):
        resolve_model("mistral/large")


@pytest.mark.parametrize(
    ("name", "sdk"), [("openai/gpt-5", "openai"), ("anthropic/c", "anthropic")]
)
def test_missing_extra_says_what_to_install(
    name: str, sdk: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setitem(sys.modules, sdk, None)  # `import sdk` now fails
    with pytest.raises(ConfigurationError) as caught:
        resolve_model(name)
    assert f"pip install 'fxworld[{sdk}]'" in str(caught.value)


def test_importing_fxworld_imports_no_model_sdk() -> None:
    script = textwrap.dedent(
        """
        import sys
        import fxworld, fxworld.models, fxworld.models.resolve, fxworld.engine, fxworld.testing
        from fxworld import Agent
        from fxworld.cli import build_parser
        from fxworld.testing import ScriptedModel

        build_parser()
        Agent(ScriptedModel(["hi"]))
        loaded = sorted(m for m in ("openai", "anthropic", "httpx2") if m in sys.modules)
        print(",".join(loaded) or "none")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "none", out.stdout + out.stderr


def _jwt(claims: dict[str, object]) -> str:
    """An unsigned token shaped like a Vercel OIDC token (the gateway checks it, not us)."""
    import base64
    import json

    def part(d: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.c2ln"


async def test_on_vercel_with_no_key_model_strings_reach_the_gateway_with_the_oidc_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    token = _jwt({"sub": "owner:team:project:app:environment:production", "exp": time.time() + 600})
    with ProviderServer(api_key=token) as server:  # it answers 401 to any other bearer
        monkeypatch.setenv("VERCEL_OIDC_TOKEN", token)
        monkeypatch.setenv("FXWORLD_GATEWAY_URL", server.url + "/v1")  # the gateway, locally
        model = Agent("anthropic/claude-opus-5.5").model
        assert isinstance(model, OpenAIModel)
        server.queue(Sse(openai_stream(["through AI Gateway"])))
        events = [e async for e in model.stream(ModelRequest("", [Message("user", "hi")]))]
        assert isinstance(events[-1], ModelResponse) and events[-1].text == "through AI Gateway"
        assert server.requests[0].headers["Authorization"] == f"Bearer {token}"
        assert server.requests[0].body["model"] == "anthropic/claude-opus-5.5"
    monkeypatch.delenv("FXWORLD_GATEWAY_URL")
    from fxworld.models.resolve import VERCEL_GATEWAY_URL

    assert VERCEL_GATEWAY_URL.endswith("/v1")
    assert isinstance(resolve_model("google/gemini-9"), OpenAIModel)  # any string, on Vercel


async def test_on_vercel_each_turn_sends_the_oidc_token_of_its_time_not_the_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Vercel refreshes the deployment's token; a warm instance (one Agent, built
    once) must send the token current at each model call, never the one it was
    built with. The local gateway answers 401 to any other bearer."""
    import time

    from fxworld import MemoryWorld

    def token(n: int) -> str:
        claims = {"sub": f"owner:team:project:app:environment:production:{n}"}
        return _jwt({**claims, "exp": time.time() + 600 * n})

    first, second = token(1), token(2)
    with ProviderServer(api_key=first) as server:
        monkeypatch.setenv("VERCEL_OIDC_TOKEN", first)
        monkeypatch.setenv("FXWORLD_GATEWAY_URL", server.url + "/v1")
        agent = Agent("anthropic/claude-opus-5.5", world=MemoryWorld(), model_retries=0)
        s = agent.session()
        kinds = []
        for prompt, now in (("first", first), ("second", second)):
            server.api_key = now  # the gateway takes only the token of the moment
            monkeypatch.setenv("VERCEL_OIDC_TOKEN", now)  # refreshed between two turns
            server.queue(Sse(openai_stream([f"answer to {prompt}"])))
            await s.prompt(prompt).accepted
            await agent.work(until_idle=True)
            kinds = [e.kind for e in await s.read()]
        assert kinds.count("turn.finished") == 2 and "turn.failed" not in kinds
        sent = [r.headers["Authorization"] for r in server.requests]
        assert sent == [f"Bearer {first}", f"Bearer {second}"]
