"""No credential is taken from a caller: a delivery's ``x-vercel-oidc-token`` header
(anyone can send one) never becomes the token the instance's later queue and
model calls use; those use the function's own (its environment)."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fxworld import Agent, MemoryWorld
from fxworld.localqueues.vercel import CONSUMER, DEPLOYMENT
from fxworld.models.resolve import vercel_oidc_token
from fxworld.push import VercelQueuePush
from fxworld.testing import ScriptedModel
from fxworld.web import WakeHandler
from tests.serverless.deployments import LEASE, vercel_env

pytest.importorskip("vercel.queue")
from vercel.oidc.aio import get_vercel_oidc_token
from vercel.queue.devserver import embedded_queue_dev_server


def _jwt(subject: str, expires: float) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part({'sub': subject, 'exp': int(expires)})}.sig"


OWN = _jwt("the-deployment", time.time() + 3600)
FORGED = _jwt("an-attacker", time.time() + 10 * 365 * 86400)  # expires after any real one


@pytest.fixture(scope="module")
def dev() -> Iterator[Any]:
    with embedded_queue_dev_server(manual_clock=False) as server:
        yield server


@pytest.fixture(autouse=True)
def env(dev: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in vercel_env(dev).items():
        monkeypatch.setenv(k, v)


async def test_a_forged_oidc_token_is_refused_and_never_becomes_the_instances(
    dev: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = Agent(ScriptedModel(["Ran."]), world=MemoryWorld())
    s = agent.session()
    await s.create("Hi")
    topic = f"credentials-{uuid.uuid4().hex[:12]}"
    await VercelQueuePush(topic).push(s.id)
    [delivery] = list(
        dev.app.iter_push_deliveries(topic, CONSUMER, lease_seconds=30, deployment=DEPLOYMENT)
    )
    # The queue calls take the OIDC token now (no queue token), as on Vercel.
    monkeypatch.delenv("VERCEL_QUEUE_TOKEN")
    monkeypatch.setenv("VERCEL_OIDC_TOKEN", OWN)
    forged = {
        **delivery.headers,
        "ce-vqsreceipthandle": "forged-receipt-handle",
        "x-vercel-oidc-token": FORGED,
    }
    handler = WakeHandler(agent, vercel=True, time_limit=10, margin=1, lease=LEASE)
    transport = httpx.ASGITransport(app=handler)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        r = await c.post("/", content=delivery.body, headers=forged)
    assert r.status_code == 403
    assert "turn.finished" not in [e.kind for e in await s.read()]
    # Later calls of this instance, outside any request: the function's own token.
    assert await get_vercel_oidc_token() == OWN  # what a queue call resolves
    assert await vercel_oidc_token() == OWN  # what a model call sends
