"""The wake route a local Vercel deployment serves: ``app``, by uvicorn in its own
process (``python -m uvicorn fxworld.localqueues.vercel_route:app``), for the
agent ``$FXWORLD_AGENT``."""

from __future__ import annotations

import os

from fxworld.commands.serve import load_agent
from fxworld.localqueues import AGENT_ENV
from fxworld.web import WakeHandler

agent = load_agent(os.environ[AGENT_ENV])

app = WakeHandler(
    agent,
    vercel=True,
    time_limit=float(os.environ.get("TIME_LIMIT", "8")),
    margin=1.5,
    lease=float(os.environ.get("TEST_LEASE", "2")),
    max_runs=16,
)
