"""The wake route the Vercel scenarios deploy: ``app``, served by uvicorn in its
own process (``python -m uvicorn tests.serverless.vercel_route:app``)."""

from __future__ import annotations

import os

from fxworld.web import WakeHandler
from tests.serverless.app import agent

app = WakeHandler(
    agent,
    vercel=True,
    time_limit=float(os.environ.get("TIME_LIMIT", "8")),
    margin=1.5,
    lease=float(os.environ.get("TEST_LEASE", "2")),
    max_runs=16,
)
