"""The inspector's session page in process (httpx on the ASGI app, over SQLite
worlds that real agents wrote): a tool's durable steps in its card, nothing stale
after a stop, a child's approval decided from its parent, turns numbered and paged,
a large value shown by its size and start with a download of the whole. The
same in Chromium: ``test_browser_session_page.py``."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any

import httpx

from fxworld import MemoryWorld, open_world
from fxworld.engine import log
from fxworld.web import create_inspector
from tests.web import _console, _turns

JSON = {"Content-Type": "application/json"}


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://inspect")


def _card(page: str, eid: str) -> str:
    """The card of call ``eid`` (cards hold steps, ``<li class="step``, not entries)."""
    found = [c for c in page.split('<li class="entry')[1:] if f'data-eid="{eid}">' in c]
    assert found and "k-tool-started" in found[0], f"no card of {eid}"
    return found[0]


def _text(html: str) -> str:
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


async def test_a_tools_card_holds_its_steps_and_says_what_may_have_partly_run(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    await _console.refund_run(url)
    world = open_world(url)
    await _console.refund_cut(world)
    app = create_inspector(world, allow_anyone=True)
    async with _client(app) as client:
        page = (await client.get("/sessions/refunds")).text
    await app.state.close()
    entries = await world.read("refunds", 0)
    await world.close()
    first = next(e.data["execution_id"] for e in entries if e.kind == log.TOOL_STARTED)
    ran = _text(_card(page, first))
    assert re.search(r"1\. reserve finished .*2\. charge_back finished .*3\. email finished", ran)
    assert "Ran: reserve, charge_back, email." in ran and '"charge": "ch_42"' in ran
    cut = _text(_card(page, "xr2"))
    assert "1. reserve finished" in cut and '"hold": "H-A-2"' in cut
    assert "2. charge_back interrupted: started, never finished; it may have partly run" in cut
    assert "3. email never reached" in cut
    assert "May have partly run: charge_back. Never reached: email." in cut
    assert "ran again after a crash (attempt 2)" in cut
    # no step entry is a card of its own, and the turns are numbered, not seqs
    assert 'class="entry k-step' not in page
    heads = re.findall(r'<span class="turn-n">([^<]*)</span>', page)
    assert heads == ["turn 1", "turn 2"]


async def test_a_child_waiting_for_approval_is_decided_from_its_parent(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    child = await _console.desk_waiting(url)
    world = open_world(url)
    app = create_inspector(world, allow_anyone=True)
    async with _client(app) as client:
        page = (await client.get("/sessions/desk")).text
        box = page.split('<div id="waiting">')[1].split('<p id="flash"')[0]
        fragment = (await client.get("/sessions/desk/waiting")).text
        [eid] = re.findall(r'data-eid="([^"]+)" data-sid="' + child + '"', box)
        decided = await client.post(
            f"/sessions/{child}/approvals/{eid}", json={"approve": True, "note": "ok by ops"}
        )
    await app.state.close()
    assert "issue_credit" in box and "acme-7" in box and "late delivery, ticket T-881" in box
    assert "in the child session" in box and "billing" in box
    head = _text(page.split('<summary class="turn-head">')[1].split("</summary>")[0])
    assert "waiting for approval in a child session" in head  # not "running"
    assert "waits for its child session, which waits for approval" in page
    assert fragment + "</div>" == box  # (the page script asks for the boxes again)
    assert decided.status_code == 200
    await _console.desk_finish(url)
    parent = await world.read("desk", 0)
    mine = [
        {k: v for k, v in e.data.items() if k != "v"}
        for e in await world.read(child, 0)
        if e.kind == log.APPROVAL_DECIDED
    ]
    await world.close()
    assert parent[-1].kind == log.TURN_FINISHED
    assert mine == [{"execution_id": eid, "approved": True, "actor": "local", "note": "ok by ops"}]


async def test_after_a_stop_a_childs_card_waits_no_more_and_holds_its_late_report(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    await _console.desk_waiting(url)
    world = open_world(url)
    app = create_inspector(world, allow_anyone=True)
    async with _client(app) as client:
        stop = await client.post("/sessions/desk/stop", json={"reason": "wrong account"})
        assert stop.status_code == 202
        await _console.desk_finish(url)
        page = (await client.get("/sessions/desk")).text
    await app.state.close()
    entries = await world.read("desk", 0)
    await world.close()
    kinds = [e.kind for e in entries]
    late = entries[-1]
    assert kinds.index(log.TURN_STOPPED) < kinds.index(log.CHILD_FINISHED)  # after its turn
    card = _text(_card(page, late.data["execution_id"]))
    assert "waits for its child" not in card and "runs in the child session" not in card
    assert "answered after its turn ended (the model did not hear it)" in card
    assert "stop requested by local" in _text(page) and "wrong account" in page
    assert f'id="e{late.seq}"' not in page  # no loose card: it is in its call's


async def test_turns_are_paged_newest_first_and_keep_their_numbers(tmp_path: Path) -> None:
    world = open_world(f"sqlite:///{tmp_path / 'w.db'}")
    await world.setup()
    for _ in range(25):
        await _turns.finished_turn(world, "long")
    app = create_inspector(world, allow_anyone=True, page_turns=10)
    async with _client(app) as client:
        latest = (await client.get("/sessions/long")).text
        link = re.search(r'id="older" href="([^"]+)"', latest)
        assert link
        older = (await client.get(link.group(1).replace("&amp;", "&"))).text
        again = (await client.get(link.group(1).split("&amp;")[0])).text  # without turns=
    await app.state.close()
    await world.close()

    def numbers(page: str) -> list[str]:
        return re.findall(r'<span class="turn-n">turn (\d+)</span>', page)

    assert numbers(latest) == [str(n) for n in range(16, 26)]
    assert "&amp;turns=15" in link.group(0)
    assert numbers(older) == [str(n) for n in range(6, 16)]
    assert numbers(again) == numbers(older)
    assert latest.count('class="entry') < 10 * 8  # 10 turns, not 25


async def test_a_large_value_shows_its_size_and_start_and_downloads_whole(tmp_path: Path) -> None:
    world = open_world(f"sqlite:///{tmp_path / 'w.db'}")
    await world.setup()
    await _console.big_result(world)
    app = create_inspector(world, allow_anyone=True)
    async with _client(app) as client:
        page = await client.get("/sessions/s-big")
        link = re.search(r'<a class="download" href="\./s-big/([^"]+)"', page.text)
        assert link
        whole = await client.get("/sessions/s-big/" + link.group(1).replace("&amp;", "&"))
        missing = await client.get("/sessions/s-big/values/4?at=/nothing")
    await app.state.close()
    entries = await world.read("s-big", 0)
    await world.close()
    value = next(e.data["output"] for e in entries if e.kind == log.TOOL_FINISHED)
    assert len(page.content) < 100_000  # the page holds the start, not 3 MiB
    assert "3.0 MiB" in page.text and f"{_console.BIG_BYTES:,} bytes" in page.text
    assert "Terms of service, section 0." in page.text
    assert whole.status_code == 200 and whole.text == value
    assert whole.headers["content-disposition"].startswith("attachment;")
    assert missing.status_code == 404


async def test_a_values_download_and_a_childs_approval_are_authorized_as_the_page(
    tmp_path: Path,
) -> None:
    """The download answers only a viewer ``authorize`` lets view the session, and
    only what ``visible`` shows of the entry; a child's waiting call is shown on
    its parent's page only to a viewer who may view the child."""
    url = f"sqlite:///{tmp_path / 'w.db'}"
    child = await _console.desk_waiting(url)
    world = open_world(url)
    await _console.big_result(world)

    def authorize(request: Any, session_id: str, action: str) -> bool:
        return request.headers.get("x-who") == "ops" or not session_id.startswith(
            ("child-", "s-big")
        )

    def visible(request: Any, event: Any) -> Any:
        hide = request.headers.get("x-hide") and event.kind == log.TOOL_FINISHED
        return None if hide else event

    app = create_inspector(world, authorize=authorize, visible=visible)
    href = "/sessions/s-big/values/6?at=/output"
    async with _client(app) as client:
        ops = {"x-who": "ops"}
        whole = await client.get(href, headers=ops)
        refused = await client.get(href)
        hidden = await client.get(href, headers={**ops, "x-hide": "1"})
        shown = (await client.get("/sessions/desk/waiting", headers=ops)).text
        not_shown = (await client.get("/sessions/desk/waiting")).text
    await app.state.close()
    await world.close()
    assert whole.status_code == 200 and len(whole.content) == _console.BIG_BYTES
    assert (refused.status_code, hidden.status_code) == (403, 404)
    assert f'data-sid="{child}"' in shown and "acme-7" in shown
    assert not_shown == ""


async def test_a_64_mib_value_never_reaches_the_page() -> None:
    """The largest value a default world takes: the page shows its size and start
    (a few KiB; the live stream's rows are drawn by the same code)."""
    world = MemoryWorld()
    big = "The quick brown fox. " * ((64 * 1024 * 1024 - 4096) // 21)
    await world.append("huge", [log.entry(log.PROMPT, text=big, key="k")])
    app = create_inspector(world, allow_anyone=True)
    async with _client(app) as client:
        page = await client.get("/sessions/huge")
    await app.state.close()
    assert len(page.content) < 50_000 and f"{len(big):,} bytes" in page.text
    assert 'href="./huge/values/1?at=/text"' in page.text


async def test_a_decision_names_who_decided_what_and_its_request_waits_no_more() -> None:
    """ "Who approved this refund?": the decision's card names the actor, the note,
    the call and the input it approved; the request's card says it was decided."""
    world = MemoryWorld()
    await _turns.waiting_turn(world, "desk-1")
    app = create_inspector(world, authorize=lambda request, sid, action: "ops:dana")
    async with _client(app) as client:
        decided = await client.post(
            "/sessions/desk-1/approvals/xdesk-13", json={"approve": True, "note": "VIP customer"}
        )
        page = (await client.get("/sessions/desk-1")).text
    await app.state.close()
    assert decided.status_code == 200
    cards = {c.split('"')[0]: _text(c) for c in page.split('<li class="entry k-')[1:]}
    assert "approved by ops:dana" in cards["approval-decided"]
    assert "VIP customer" in cards["approval-decided"]
    assert (
        'the call: refund_order (asked at #5) with the input {"id": "A-1041", "amount": 49.9}'
        in (cards["approval-decided"])
    )
    request = cards["approval-requested"]
    assert (
        "waits for a decision" not in request and "decided at #6: approved by ops:dana" in request
    )
    assert 'class="decide"' not in page
