"""The wake routes of tests/serverless/test_two_agents_push.py, served by uvicorn in
their own process: ``/wake/support`` and ``/wake/sales`` (one route per agent, pushed
by a URL with ``{agent}``) and ``/wake`` (one route serving both, on one shared URL).
Signed with ``$FXWORLD_WAKE_SECRET``; the world is ``$FXWORLD_URL``."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import Mount

from fxworld.web import WakeHandler
from tests.fleet.two_agents_app import both, sales, support


def _route(agents: object) -> WakeHandler:
    return WakeHandler(agents, time_limit=30, margin=2, lease=2, max_runs=16)  # type: ignore[arg-type]


app = Starlette(
    routes=[
        Mount("/wake/support", _route(support)),
        Mount("/wake/sales", _route(sales)),
        Mount("/wake", _route(both)),
    ]
)
