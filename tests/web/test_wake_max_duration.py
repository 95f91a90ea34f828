"""On Vercel, the wake route's time limit is the function's ``maxDuration``, from the
``vercel.json`` deployed with it; an explicit ``time_limit=`` wins."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from fxworld.web import WakeHandler, signed_headers
from tests.web.test_wake import SECRET, kinds, make_agent

pytestmark = pytest.mark.timeout(60)

QUEUE_TRIGGER = [{"type": "queue/v2beta", "topic": "fxworld-wakes"}]


def deploy(root: Path, functions: dict[str, object]) -> None:
    """A project's ``vercel.json``, as the function's bundle carries it."""
    (root / "vercel.json").write_text(json.dumps({"functions": functions}))


async def first_answer(handler: WakeHandler, sid: str) -> tuple[int, str]:
    body = json.dumps({"session_id": sid}).encode()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=handler), base_url="http://test"
    ) as client:
        r = await client.post("/", content=body, headers=signed_headers(SECRET, body))
    return r.status_code, r.json()["status"]


async def test_on_vercel_a_turn_yields_within_the_functions_max_duration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The whole turn takes about 1.4 s (model 0.2 s, tool 0.4 s, text 4 x 0.2 s);
    # maxDuration 2 less the 0.8 s margin leaves 1.2 s: the turn must yield.
    deploy(tmp_path, {"api/fxworld.py": {"maxDuration": 2, "experimentalTriggers": QUEUE_TRIGGER}})
    monkeypatch.chdir(tmp_path)
    agent = make_agent(delay=0.2)
    sid = (await agent.session().prompt("where is A-1?").accepted).session_id
    handler = WakeHandler(agent, secret=SECRET, vercel=True, margin=0.8)
    assert handler.time_limit == 2.0
    assert await first_answer(handler, sid) == (503, "deadline")  # no push: deliver again
    assert "turn.yielded" in await kinds(agent, sid)


async def test_an_explicit_time_limit_wins_over_max_duration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deploy(tmp_path, {"api/fxworld.py": {"maxDuration": 2, "experimentalTriggers": QUEUE_TRIGGER}})
    monkeypatch.chdir(tmp_path)
    agent = make_agent(delay=0.2)
    sid = (await agent.session().prompt("where is A-1?").accepted).session_id
    handler = WakeHandler(agent, secret=SECRET, vercel=True, margin=0.8, time_limit=30)
    assert await first_answer(handler, sid) == (200, "done")
    assert "turn.yielded" not in await kinds(agent, sid)


def test_the_function_is_found_by_its_entrypoint_else_by_its_queue_trigger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    deploy(
        bundle,
        {
            "api/*.py": {"memory": 1024},
            "api/fxworld.py": {"maxDuration": 120},
            "api/other.py": {"maxDuration": 800, "experimentalTriggers": QUEUE_TRIGGER},
        },
    )
    agent = make_agent()
    # Vercel's Python launcher names the entrypoint; the bundle's root follows.
    monkeypatch.setenv("__VC_HANDLER_ENTRYPOINT", "api/fxworld.py")
    monkeypatch.setenv("__VC_HANDLER_ENTRYPOINT_ABS", str(bundle / "api" / "fxworld.py"))
    assert WakeHandler(agent, secret=SECRET, vercel=True).time_limit == 120.0
    monkeypatch.delenv("__VC_HANDLER_ENTRYPOINT")
    monkeypatch.delenv("__VC_HANDLER_ENTRYPOINT_ABS")
    monkeypatch.chdir(bundle)
    assert WakeHandler(agent, secret=SECRET, vercel=True).time_limit == 800.0


@pytest.mark.parametrize(
    "functions",
    [
        None,  # no vercel.json
        {"api/fxworld.py": {"maxDuration": "max", "experimentalTriggers": QUEUE_TRIGGER}},
        {  # two queue functions, two limits: which one is this is not known
            "api/a.py": {"maxDuration": 30, "experimentalTriggers": QUEUE_TRIGGER},
            "api/b.py": {"maxDuration": 90, "experimentalTriggers": QUEUE_TRIGGER},
        },
    ],
)
def test_without_one_max_duration_the_time_limit_is_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, functions: dict[str, object] | None
) -> None:
    if functions is not None:
        deploy(tmp_path, functions)
    monkeypatch.chdir(tmp_path)
    assert WakeHandler(make_agent(), secret=SECRET, vercel=True).time_limit == 60.0


def test_off_vercel_vercel_json_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deploy(tmp_path, {"api/fxworld.py": {"maxDuration": 2, "experimentalTriggers": QUEUE_TRIGGER}})
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VERCEL", raising=False)
    assert WakeHandler(make_agent(), secret=SECRET).time_limit == 60.0
