"""Two agents sharing one world, for tests/fleet/test_two_agents.py and
tests/serverless/test_two_agents_push.py: ``support`` and ``sales`` answer every
prompt with their own name (scripted, so a session answered by the wrong agent
shows it). ``agent`` is the one ``$TEST_AGENT`` names (a worker process or a
function of one agent); ``both`` are the two (one route or function serving both).
The world is the process's (``--world``, ``$FXWORLD_URL``); the push, if any,
``$FXWORLD_PUSH``."""

from __future__ import annotations

import os

from fxworld import Agent
from fxworld.testing import ScriptedModel

NAMES = ("support", "sales")


def answer(name: str) -> str:
    return f"answered by {name}"


def make(name: str) -> Agent:
    return Agent(ScriptedModel([answer(name)]), name=name)


support, sales = make("support"), make("sales")
both = [support, sales]
agent = {"support": support, "sales": sales}[os.environ.get("TEST_AGENT", "support")]
