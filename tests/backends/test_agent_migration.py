"""Worlds written before agent routing (issue 44 item 5), upgraded in place.

A subprocess runs the code of the last commit before agent routing
(``tests.support.before``), on a fresh SQLite
file and a fresh PostgreSQL namespace: it answers one session and leaves another one's prompt
waiting. This branch's code then opens the same world: ``setup()`` upgrades it
(idempotent, also run twice at once), the old sessions have no owner, and each is
claimed by the first agent that prompts or runs it; after that, the other agent's
prompt is refused and its worker leaves the session alone.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fxworld import Agent, open_world
from fxworld.engine import log
from fxworld.errors import WrongAgent
from fxworld.protocol import AgentRouter
from fxworld.testing import ScriptedModel
from tests.support.before import unpack_before
from tests.support.namespaces import fresh_namespace

_OLD = textwrap.dedent(
    """
    import asyncio, sys
    from fxworld import Agent, open_world
    from fxworld.testing import ScriptedModel

    async def main(url):
        world = open_world(url)
        await world.setup()
        agent = Agent(ScriptedModel(["old answer"]), world=world)
        await agent.session("old-1").prompt("Hi").accepted
        await agent.work(until_idle=True, poll_interval=0.02)
        await agent.session("old-2").prompt("Waiting").accepted  # left for the new code
        await world.close()

    asyncio.run(main(sys.argv[1]))
    """
)


@pytest.fixture(scope="module")
def old_code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack_before(tmp_path_factory.mktemp("before"))


def write_with_old_code(url: str, old_code: Path) -> None:
    """Write the old world with the code before agent routing, in its own process."""
    env = {**os.environ, "PYTHONPATH": str(old_code)}
    done = subprocess.run(
        [sys.executable, "-c", _OLD, url], env=env, cwd=old_code, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")


async def texts(world: object, sid: str) -> list[str]:
    got = await world.read(sid, 0)  # type: ignore[attr-defined]
    return [e.data["text"] for e in got if e.kind == log.TURN_FINISHED]


@pytest.fixture(params=["sqlite", "postgres", "pgbouncer"])
def old_world_url(request: pytest.FixtureRequest, tmp_path: Path, old_code: Path) -> str:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/world.db"
    elif request.param == "postgres":
        url = f"{request.getfixturevalue('postgres_server').url}?namespace={fresh_namespace('m')}"
    else:  # through PgBouncer in transaction mode: no session-level state
        bouncer = request.getfixturevalue("pgbouncer")
        url = f"{bouncer.url}?namespace={fresh_namespace('m')}&pooler=transaction"
    write_with_old_code(url, old_code)
    return url


async def test_a_world_written_by_the_code_before_keeps_working(old_world_url: str) -> None:
    first, second = open_world(old_world_url), open_world(old_world_url)
    try:
        await asyncio.gather(first.setup(), second.setup())  # upgraded once, at once
        await first.setup()  # idempotent
        assert isinstance(first, AgentRouter)
        assert await first.owner("old-1") is None and await first.owner("old-2") is None
        assert await texts(first, "old-1") == ["old answer"]
        support = Agent(
            ScriptedModel(["old answer", "support answers"]), world=first, name="support"
        )
        sales = Agent(ScriptedModel(["sales answers"]), world=second, name="sales")
        # the waiting prompt of old-2 (no owner) is run by the first worker that takes it
        await asyncio.wait_for(sales.work(until_idle=True, poll_interval=0.02), 60)
        assert await texts(first, "old-2") == ["sales answers"]
        assert await first.owner("old-2") == "sales"
        # old-1 (answered, no owner) is claimed by the first agent that prompts it
        await support.session("old-1").prompt("Again").accepted
        assert await first.owner("old-1") == "support"
        await asyncio.wait_for(sales.work(until_idle=True, poll_interval=0.02), 60)
        assert await texts(first, "old-1") == ["old answer"]  # sales ran none of it
        await asyncio.wait_for(support.work(until_idle=True, poll_interval=0.02), 60)
        assert await texts(first, "old-1") == ["old answer", "support answers"]
        with pytest.raises(WrongAgent):
            await sales.session("old-1").prompt("Mine?").accepted
    finally:
        await first.close()
        await second.close()
