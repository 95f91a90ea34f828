"""The inspector's session and sessions pages in Chromium (a real ``fxworld
inspect`` over a SQLite world seeded by ``_turns``): turns grouped, a tool's start
and end in one card, the badges and words of the header, no jump on load, the
sessions list's preview, state filter and search, and Retry of a failed turn."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fxworld import open_world
from fxworld.engine import log
from tests.support.ports import free_port
from tests.web import _turns
from tests.web._server import ServeProcess
from tests.web.test_browser_inspector import WAIT, _run

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def inspector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, str]]:
    tmp = tmp_path_factory.mktemp("turns")
    url = f"sqlite:///{tmp / 'world.db'}"

    async def seed() -> None:
        world = open_world(url)
        await world.setup()
        await _turns.seed(world)
        long = [log.entry(log.PROMPT, text=f"note {n}", key=f"k{n}") for n in range(150)]
        await world.append("s-long", long)
        await _turns.finished_turn(world, "s-long")
        await world.close()

    _run(seed())
    server = ServeProcess(["--world", url], free_port(), tmp / "inspect.log", command="inspect")
    server.start(probe="/assets/inspector.css")
    try:
        yield server, url
    finally:
        server.stop()


def _cards(page: Any) -> list[dict[str, str]]:
    return page.eval_on_selector_all(  # type: ignore[no-any-return]
        "li.entry",
        "els => els.map(e => ({cls: e.className, kind: e.querySelector('.kind').textContent,"
        " text: e.textContent}))",
    )


def test_a_session_page_groups_entries_by_turn(inspector: Any, page: Any) -> None:
    server, _ = inspector
    page.goto(server.base + "/sessions/s-failed")
    groups = page.locator("#timeline > li.turn")
    assert groups.count() == 2 and page.locator("#timeline > li.entry").count() == 0
    first, failed = groups.nth(0), groups.nth(1)
    head = first.locator("summary").text_content()
    assert "finished" in head and "Where is order A-1041?" in head
    assert "tools: get_order" in head and " s" in head  # its duration
    assert not first.locator("details").evaluate("d => d.open")  # finished: folded
    assert failed.locator("details").evaluate("d => d.open")  # the latest turn: open
    head = failed.locator("summary").text_content()
    assert "failed" in head and "Send me the invoice" in head and "get_invoice" in head
    # the prompt and the fence that led to a turn are in its group
    assert first.locator(".k-prompt").count() == 1 and first.locator(".k-fence").count() == 1
    first.locator("summary").click()
    assert first.locator(".k-message").first.is_visible()
    page.goto(server.base + "/sessions/s-waiting")
    waiting = page.locator("#timeline > li.turn").nth(1)
    assert "waiting for approval" in waiting.locator("summary .state").text_content()
    assert "so far" in waiting.locator("summary").text_content()


def test_a_tools_start_and_finish_are_one_card_with_its_duration(inspector: Any, page: Any) -> None:
    server, _ = inspector
    page.goto(server.base + "/sessions/s-finished")
    tool = page.locator("li.entry.k-tool-started")
    assert tool.count() == 1 and page.locator("li.entry.k-tool-finished").count() == 1
    text = tool.text_content()
    assert "#5 → #6" in text and "ok in 0." in text
    assert '"carrier": "DHL"' in text and '"id": "A-1041"' in text  # input and output


def test_tool_interrupted_does_not_wear_the_ok_badge(inspector: Any, page: Any) -> None:
    server, _ = inspector
    page.goto(server.base + "/sessions/s-interrupted")
    card = page.locator("li.entry.k-tool-interrupted")
    assert card.count() == 1
    assert card.locator(".badge.ok").count() == 0
    assert "not run again" in card.locator(".badge.warn").text_content()
    _shot_to(page, "s-interrupted")


def test_each_card_shows_its_kind_once(inspector: Any, page: Any) -> None:
    server, _ = inspector
    for sid in ("s-failed", "s-interrupted", "s-waiting", "s-finished"):
        page.goto(server.base + f"/sessions/{sid}")
        for card in _cards(page):
            for kind in card["kind"].split(" → "):
                assert card["text"].count(kind) == 1, (sid, card)


def test_the_header_says_worker_takeovers_and_next_wake(inspector: Any, page: Any) -> None:
    server, _ = inspector
    page.goto(server.base + "/sessions/s-interrupted")
    summary = page.text_content("#summary")
    assert "worker takeovers: 1" in summary and "epoch" not in summary
    assert "next wake: none" in summary
    page.goto(server.base + "/sessions/s-finished")
    assert "worker takeovers: 0" in page.text_content("#summary")


def test_the_page_does_not_jump_on_load(inspector: Any, page: Any) -> None:
    server, _ = inspector
    page.add_init_script("window.scrolled = 0; addEventListener('scroll', () => scrolled++)")
    page.set_viewport_size({"width": 1200, "height": 500})
    page.goto(server.base + "/sessions/s-long", wait_until="load")
    assert page.evaluate("document.body.scrollHeight > innerHeight")  # it could scroll
    page.wait_for_function("performance.getEntriesByType('resource').length >= 2")
    assert page.evaluate("[scrollY, scrolled]") == [0, 0]


def test_the_sessions_list_previews_filters_and_searches(inspector: Any, page: Any) -> None:
    server, _ = inspector
    page.goto(server.base + "/")
    page.wait_for_selector('tr[data-sid="s-running"]', timeout=WAIT)
    row = page.locator('tr[data-sid="s-running"]')
    assert row.locator("td.preview").text_content() == "What is the return policy?"
    for state, sids in (
        ("running", {"s-running"}),
        ("waiting for approval", {"s-waiting"}),
        ("failed", {"s-failed"}),
        ("idle", {"s-finished", "s-interrupted", "s-long"}),
    ):
        page.select_option("#f-state", state)
        with page.expect_navigation():
            page.click("form.filters button")
        shown = set(page.eval_on_selector_all("tr[data-sid]", "rs => rs.map(r => r.dataset.sid)"))
        assert shown == sids, state
    page.fill("#q", "s-f")
    with page.expect_navigation():
        page.click("form.filters button")
    shown = page.eval_on_selector_all("tr[data-sid]", "rs => rs.map(r => r.dataset.sid)")
    assert shown == ["s-finished"]  # the search keeps the state filter (s-failed is not idle)
    page.select_option("#f-state", "")
    with page.expect_navigation():
        page.click("form.filters button")
    assert page.url.endswith("/?q=s-f")  # only the filters chosen
    shown = page.eval_on_selector_all("tr[data-sid]", "rs => rs.map(r => r.dataset.sid)")
    assert shown == ["s-failed", "s-finished"]  # what needs a person first
    _shot_to(page, "sessions-search")


def test_a_failed_turn_is_retried_from_its_page(inspector: Any, page: Any) -> None:
    server, url = inspector
    page.goto(server.base + "/sessions/s-failed")
    retry = page.locator("li.turn button.retry")
    assert retry.count() == 1
    retry.click()
    page.wait_for_selector("text=Retry sent", timeout=WAIT)
    page.wait_for_selector("#timeline > li.entry.k-prompt", timeout=WAIT)  # streamed live
    assert page.locator("button.retry").count() == 0  # not failed any more
    assert page.text_content("#state") == "running"

    async def answer() -> None:  # a worker answers the retry
        world = open_world(url)
        last = (await world.read("s-failed"))[-1]
        fence = await world.acquire("s-failed")
        entries = [
            log.entry(log.TURN_STARTED, prompt=last.seq, turn="t-retry"),
            _turns.message("m9", "Here is the invoice."),
            log.entry(log.TURN_FINISHED, prompt=last.seq, turn="t-retry", text="Here it is."),
        ]
        await world.append("s-failed", entries, fence=fence)
        await world.close()

    _run(answer())
    page.wait_for_function(
        "document.querySelectorAll('#timeline > li.turn').length == 3", timeout=WAIT
    )
    groups = page.locator("#timeline > li.turn")
    newest = groups.nth(2)
    newest.locator(".k-turn-finished").wait_for(timeout=WAIT)
    assert newest.locator(".k-prompt").count() == 1  # the retry's prompt moved into its turn
    assert "finished" in newest.locator("summary").text_content()
    assert newest.locator("summary .badge").text_content() == "retry"
    assert not groups.nth(1).locator("details").evaluate("d => d.open")  # the failed one folds
    assert page.text_content("#state") == "idle"
    _shot_to(page, "s-failed-retried")


def _shot_to(page: Any, name: str) -> None:
    """A screenshot where ``FXWORLD_SHOTS`` says (none by default)."""
    import os

    where = os.environ.get("FXWORLD_SHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(where) / f"{name}.png"), full_page=True)


def test_a_turn_streamed_live_pairs_its_tool_and_fails_into_retry(
    inspector: Any, page: Any
) -> None:
    """Live, as on a page: a tool's end replaces its start's card, the turn's header
    follows, and a failure brings the Retry button."""
    server, url = inspector
    c = _turns.call("live", "get_invoice", id="A-7")

    async def start() -> None:
        world = open_world(url)
        await _turns.turn(world, "s-live", "Invoice A-7?", _turns.message("m", "", c))
        await world.close()

    async def end() -> None:
        world = open_world(url)
        fence = await world.acquire("s-live")
        prompt = (await world.read("s-live"))[0].seq
        await world.append("s-live", [_turns.started(c)], fence=fence)
        await world.append(
            "s-live",
            [
                _turns.finished(c, "billing is down", is_error=True),
                log.entry(log.TURN_FAILED, prompt=prompt, turn="t", error="gave up"),
            ],
            fence=fence,
        )
        await world.close()

    _run(start())
    page.goto(server.base + "/sessions/s-live")
    assert page.locator("button.retry").count() == 0
    _run(end())
    page.locator("button.retry").wait_for(timeout=WAIT)
    group = page.locator("#timeline > li.turn")
    assert group.count() == 1
    assert "failed" in group.locator("summary .state").text_content()
    assert "tools: get_invoice" in group.locator("summary").text_content()
    tool = group.locator("li.entry.k-tool-started")
    assert tool.count() == 1 and "error in" in tool.text_content()  # one card, replaced live
    assert "billing is down" in tool.text_content()
    _shot_to(page, "s-live-failed")
