"""The session page as a support team works it, in Chromium (a real ``fxworld
inspect`` process over SQLite and PostgreSQL worlds written by real agents,
``_console``):

- a refund's card holds its durable steps in order, each with its state and
  result, and says what ran and what may have partly run;
- a desk session whose billing sub-agent waits for approval of a credit shows that
  approval, with the input to approve, on the desk's page; Approve there, with a
  note, decides the child's call (who and why in the child's log), and the desk's
  turn finishes live once a worker runs;
- Stop, confirmed with a reason, on a desk waiting for its child: once a worker
  ran, the call's card no longer waits for its child and holds the child's late
  report;
- a 3 MiB tool result shows its size and first 4 KiB, and its link downloads it whole.

Screenshots of the SQLite run go to ``docs/images/`` (docs/inspector.md shows
them); the PostgreSQL run's to ``artifacts/inspector/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fxworld import open_world
from fxworld.engine import log
from tests.web import _console
from tests.web._server import REPO
from tests.web.test_browser_inspector import ARTIFACTS, WAIT, _inspect, _run

pytestmark = pytest.mark.timeout(240)

DOCS_IMAGES = REPO / "docs" / "images"


def _read(url: str, sid: str) -> list[Any]:
    found: list[list[Any]] = []

    async def read() -> None:
        world = open_world(url)
        try:
            found.append(await world.read(sid, 0))
        finally:
            await world.close()

    _run(read())
    return found[0]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_support_desk_works_its_sessions_from_the_session_page(
    backend: str, tmp_path: Path, page: Any, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'world.db'}"
        shots = DOCS_IMAGES
    else:
        url = request.getfixturevalue("pg_url")
        shots = ARTIFACTS
    shots.mkdir(parents=True, exist_ok=True)
    suffix = "" if backend == "sqlite" else f"-{backend}"

    def shot(target: Any, name: str) -> None:
        target.screenshot(path=str(shots / f"{name}{suffix}.png"))

    async def seed() -> dict[str, str]:
        await _console.refund_run(url)
        world = open_world(url)
        await _console.refund_cut(world)
        await _console.big_result(world)
        await world.close()
        return {
            "desk": await _console.desk_waiting(url, "desk"),
            "desk-stop": await _console.desk_waiting(url, "desk-stop"),
        }

    children: list[dict[str, str]] = []

    async def seeded() -> None:
        children.append(await seed())

    _run(seeded())
    inspect = _inspect(url, tmp_path)
    try:
        # -- a refund's steps, in its card ------------------------------------------
        page.goto(inspect.base + "/sessions/refunds")
        heads = page.locator("#timeline > li.turn summary .turn-n").all_text_contents()
        assert heads == ["turn 1", "turn 2"]
        cut = page.locator("li.entry.k-tool-started", has_text="A-2")
        steps = cut.locator("ol.steps > li")
        assert steps.count() == 3
        states = [steps.nth(i).locator(".step-state").text_content() for i in range(3)]
        assert states[0] == "finished" and states[2] == "never reached"
        assert states[1].startswith("interrupted") and "may have partly run" in states[1]
        story = cut.locator(".story").text_content()
        assert "Ran: reserve. May have partly run: charge_back. Never reached: email." in story
        shot(cut, "inspector-tool-steps")

        # -- a child's approval, decided from its parent's page ---------------------
        child = children[0]["desk"]
        page.goto(inspect.base + "/sessions/desk")
        box = page.locator(f'#waiting .decide[data-sid="{child}"]')
        box.wait_for(timeout=WAIT)
        text = box.text_content()
        assert "issue_credit" in text and "acme-7" in text and "late delivery, ticket T-881" in text
        assert "in the child session" in text
        head = page.text_content("#timeline > li.turn summary")
        assert "waiting for approval in a child session" in head
        assert page.text_content("#state") == "waiting for approval"  # not "running"
        box.locator("input.decision-note").fill("goodwill credit, ok by Dana")
        shot(page.locator("#waiting"), "inspector-approval-input")
        shot(page, "inspector-session")  # the whole page (docs/inspector.md opens with it)
        box.locator("button.approve").click()
        page.wait_for_selector(f'#waiting .decide[data-sid="{child}"]', state="detached")
        assert "Approved" in page.text_content("#flash")
        _run(_console.desk_finish(url))
        page.wait_for_selector("#timeline .k-turn-finished", timeout=WAIT)  # streamed live
        answered = page.locator("li.entry.k-tool-started", has_text="billing").text_content()
        assert "its child session" in answered and "Credit issued: 20 EUR." in answered
        [decided] = [e for e in _read(url, child) if e.kind == log.APPROVAL_DECIDED]
        assert (decided.data["actor"], decided.data["note"]) == (
            "local",
            "goodwill credit, ok by Dana",
        )

        # -- Stop: nothing stale after it -------------------------------------------
        page.goto(inspect.base + "/sessions/desk-stop")
        card = page.locator("li.entry.k-tool-started", has_text="billing")
        assert "waits for its child session" in card.text_content()
        page.click("#stop")
        page.fill("#stop-reason", "wrong account")
        page.click("#stop-yes")
        page.wait_for_selector(".k-stop-requested", timeout=WAIT)
        _run(_console.desk_finish(url))
        page.wait_for_selector(".k-turn-stopped", timeout=WAIT)
        page.wait_for_function(
            "document.querySelector('li.entry.k-child-finished') !== null", timeout=WAIT
        )
        text = card.text_content()
        assert "waits for its child" not in text
        assert "answered after its turn ended (the model did not hear it)" in text
        assert page.locator("#timeline > li.entry").count() == 0  # no loose card
        page.reload()  # the page drawn by the server says the same
        text = page.locator("li.entry.k-tool-started", has_text="billing").text_content()
        assert "waits for its child" not in text and "after its turn ended" in text
        page.locator("#timeline > li.turn details").last.evaluate("d => d.open = true")
        shot(page.locator("#timeline > li.turn").last, "inspector-stop-child")

        # -- a large value: its size, its start, the whole as a download ------------
        page.goto(inspect.base + "/sessions/s-big")
        big = page.locator(".big").first
        assert "3.0 MiB" in big.text_content() and "Terms of service, section 0." in (
            big.text_content()
        )
        html_bytes = len(page.content().encode())
        assert html_bytes < 100_000, html_bytes
        shot(page.locator("li.entry.k-tool-started").first, "inspector-large-value")
        href = big.locator("a.download").get_attribute("href")
        whole = page.request.get(inspect.base + "/sessions/" + href.removeprefix("./"))
        assert whole.ok and len(whole.body()) == _console.BIG_BYTES
    except BaseException:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"console-failure-{backend}.png"), full_page=True)
        print(inspect.output())
        raise
    finally:
        inspect.stop()
