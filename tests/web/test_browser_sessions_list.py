"""The sessions page as a support team's console, in Chromium, on SQLite and
PostgreSQL (a real ``fxworld inspect`` over the desk of ``_desk``):

- it opens on what needs a person (waiting for approval, stuck, failed, a tool
  error, an interrupted step, stopped), each with its count and a filter kept in the
  URL across a reload; Clear records who cleared a mark, and the mark is gone;
- filters by agent, context, state and time, and a search within ids and first
  prompts; a child session sits under its parent, which shows the child's approval.

Screenshots: ``docs/images/inspector-*.png`` from SQLite (the docs show them),
``artifacts/inspector/console-postgres-*.png`` from PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fxworld import open_world
from fxworld.engine import log
from tests.support.ports import free_port
from tests.web import _desk
from tests.web._server import REPO, ServeProcess
from tests.web.test_browser_inspector import ARTIFACTS, WAIT, _run

pytestmark = pytest.mark.timeout(180)

DOCS_IMAGES = REPO / "docs" / "images"


def _shot(page: Any, backend: str, name: str) -> None:
    path = (
        DOCS_IMAGES / f"inspector-{name}.png"
        if backend == "sqlite"
        else ARTIFACTS / f"console-{backend}-{name}.png"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)


def _sids(page: Any) -> list[str]:
    return page.eval_on_selector_all(  # type: ignore[no-any-return]
        "tbody#sessions tr[data-sid]", "rs => rs.map(r => r.dataset.sid)"
    )


def _count(page: Any, attention: str) -> int:
    return int(page.text_content(f'nav.attention a[data-attention="{attention}"] b'))


async def _cleared(url: str, sid: str) -> list[dict[str, Any]]:
    world = open_world(url)
    try:
        entries = await world.read(sid, 0, limit=100)
    finally:
        await world.close()
    return [dict(e.data) for e in entries if e.kind == log.ATTENTION_CLEARED]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_console_opens_on_what_needs_a_person_and_finds_by_what_a_team_knows(
    backend: str, tmp_path: Path, page: Any, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'world.db'}"
    else:
        url = request.getfixturevalue("pg_url")

    async def seed() -> None:
        world = open_world(url)
        await world.setup()
        await _desk.seed(world)
        await world.close()

    _run(seed())
    inspect = ServeProcess(
        ["--world", url, "--stuck-after", "0.5"],
        free_port(),
        tmp_path / "inspect.log",
        command="inspect",
    )
    inspect.start(probe="/assets/inspector.css")
    try:
        # -- attention first: each reason counted; the stuck one once its wake waited
        page.goto(inspect.base + "/")
        page.wait_for_selector('tr[data-sid="t-globex-0003"] .att-stuck', timeout=WAIT)
        page.reload()  # the counts are the page's, as loaded
        counts = {name: _count(page, name) for name in ("any", "waiting", "stuck", "failed")}
        assert counts == {"any": 8, "waiting": 2, "stuck": 1, "failed": 2}
        assert (_count(page, "tool-error"), _count(page, "interrupted")) == (1, 1)
        assert _count(page, "stopped") == 1
        rows = _sids(page)
        needing = [sid for sid in rows if page.locator(f'tr[data-sid="{sid}"] .att').count()]
        assert rows[: len(needing)] == needing  # what needs a person comes first
        assert set(rows[len(needing) :]) == set(_desk.CLEAN)
        # the child under its parent, and the parent shows the child's approval
        child = page.locator('tr[data-sid="child-e-credit"]')
        assert child.get_attribute("data-parent") == "t-acme-0005"
        assert rows.index("child-e-credit") == rows.index("t-acme-0005") + 1
        parent = page.locator('tr[data-sid="t-acme-0005"]')
        assert "waiting for approval" in parent.locator("td.needs").text_content()
        assert "Credit me 40 EUR" in page.text_content('tr[data-sid="t-acme-0002"] td.preview')
        _shot(page, backend, "attention")

        # -- a filter is in the URL, and a reload keeps it
        page.click('nav.attention a[data-attention="failed"]')
        page.wait_for_url("**attention=failed**")
        assert _sids(page) == ["t-acme-0006", "t-globex-0001"]
        page.reload()
        assert _sids(page) == ["t-acme-0006", "t-globex-0001"]
        current = page.locator('nav.attention a[aria-current="true"]')
        assert current.get_attribute("data-attention") == "failed"
        # t-acme-0006's failed turn was retried: it runs again and keeps its mark
        assert "running" in page.text_content('tr[data-sid="t-acme-0006"]')

        # -- Clear records who cleared it; the mark is gone
        page.click('tr[data-sid="t-globex-0001"] button.clear')
        page.wait_for_selector("#flash:has-text('Cleared t-globex-0001')", timeout=WAIT)
        cleared: list[dict[str, Any]] = []
        _run(_fill(cleared, url, "t-globex-0001"))
        assert [c["actor"] for c in cleared] == ["local"]
        page.reload()
        assert _sids(page) == ["t-acme-0006"]
        assert _count(page, "failed") == 1

        # -- find by what a team knows: agent, context, state, time, search
        page.goto(inspect.base + "/")
        page.select_option("#f-agent", "billing")
        page.click("form.filters button")
        page.wait_for_url("**agent=billing**")
        assert _sids(page) == ["t-acme-0005", "child-e-credit"]  # the family, parent first
        _shot(page, backend, "child")
        page.goto(inspect.base + "/")
        page.fill("#f-context", "tenant=globex")
        page.select_option("#f-state", "idle")
        page.select_option("#f-active", "1h")
        page.click("form.filters button")
        page.wait_for_url("**tenant%3Dglobex**")
        assert set(_sids(page)) == {"t-globex-0002", "t-globex-0004"}
        assert _count(page, "tool-error") == 1 and _count(page, "failed") == 0
        page.reload()
        assert page.input_value("#f-context") == "tenant=globex"
        assert set(_sids(page)) == {"t-globex-0002", "t-globex-0004"}
        _shot(page, backend, "filters")
        page.goto(inspect.base + "/")
        page.fill("#q", "PARCEL")  # within first prompts, any case
        with page.expect_navigation():
            page.click("form.filters button")
        assert page.url.endswith("/?q=PARCEL")  # only the filters chosen
        assert _sids(page) == ["t-acme-0001"]
        page.fill("#q", "acme-000")  # within ids, not only their start
        with page.expect_navigation():
            page.click("form.filters button")
        assert len(_sids(page)) == 7  # six of acme and the child under its parent
    finally:
        inspect.stop()


async def _fill(out: list[dict[str, Any]], url: str, sid: str) -> None:
    out.extend(await _cleared(url, sid))
