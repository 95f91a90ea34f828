"""An agent tool's parent and child sessions in the inspector, in Chromium: the
parent's call links to its child session, the child's first prompt links back.

A real ``fxworld inspect`` over a SQLite world where a real worker (in this
process) ran a desk agent whose tool is a researcher agent (``as_tool``).
Screenshots: ``artifacts/inspector/subagent-parent.png``, ``subagent-child.png``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from fxworld import Agent, open_world, tool
from fxworld.engine import child_session_id
from fxworld.testing import ScriptedModel
from tests.support.ports import free_port
from tests.web._server import ServeProcess
from tests.web.test_browser_inspector import ARTIFACTS, WAIT, _run

pytestmark = pytest.mark.timeout(180)


@tool(idempotent=True)
def search(query: str) -> str:
    """Search the order system."""
    return f"{query}: ships 3 May"


async def _team(url: str) -> str:
    """A desk turn that asked the researcher; the desk's session id."""
    world = open_world(url)
    researcher = Agent(
        ScriptedModel([{"tool": "search", "input": {"query": "order A"}}, "It ships 3 May."]),
        tools=[search],
        name="researcher",
    )
    desk = Agent(
        ScriptedModel([{"tool": "research", "input": {"input": "When does A ship?"}}, "3 May."]),
        tools=[researcher.as_tool(name="research")],
        world=world,
    )
    turn = desk.session("s-desk").prompt("When does order A ship?")
    await asyncio.wait_for(desk.work(until_idle=True, poll_interval=0.02), 60)
    assert await turn == "3 May."
    await world.close()
    return turn.session_id


def test_parent_and_child_sessions_link_both_ways(tmp_path: Path, page: Any) -> None:
    url = f"sqlite:///{tmp_path / 'world.db'}"
    _run(_team(url))
    log = tmp_path / "inspect.log"
    server = ServeProcess(["--world", url], free_port(), log, command="inspect")
    server.start(probe="/assets/inspector.css")
    try:
        page.goto(server.base + "/sessions/s-desk")
        call = page.locator("li.entry.k-tool-started", has_text="research")
        call.wait_for(timeout=WAIT)
        assert "its child session" in call.text_content()  # child.finished ended its card
        assert "It ships 3 May." in call.text_content()
        assert page.locator("li.entry.k-child-started").count() == 0  # one card per call
        assert "worker takeovers: 0" in page.text_content("#summary")  # it waited
        link = call.locator("a.session-link.child")
        child = link.text_content()
        assert child.startswith("child-")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "subagent-parent.png"), full_page=True)

        link.click()
        page.wait_for_url(f"**/sessions/{child}", timeout=WAIT)
        assert page.text_content("h1") == f"Session {child}"
        prompt = page.locator("li.entry.k-prompt")
        assert "asked by session s-desk" in prompt.text_content()
        eid = child.removeprefix("child-")
        assert child == child_session_id(eid) and eid in prompt.text_content()
        assert page.locator("li.entry.k-tool-started", has_text="search").count() == 1
        page.screenshot(path=str(ARTIFACTS / "subagent-child.png"), full_page=True)

        page.click("li.entry.k-prompt a.session-link.parent")
        page.wait_for_url("**/sessions/s-desk", timeout=WAIT)
        assert page.text_content("h1") == "Session s-desk"
    except BaseException:
        print(server.output())
        raise
    finally:
        server.stop()
