"""One fold of a session's log into its state (``fxworld.engine.summary``), read by
``fxworld sessions`` and by the inspector alike."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fxworld import NewEntry, SqliteWorld
from fxworld.cli import main
from fxworld.engine import log
from fxworld.engine.summary import STATES, nested_state, summarize
from fxworld.types import Entry
from tests.web._turns import seed

AT = datetime(2026, 12, 1, tzinfo=UTC)


def entries(*kinds_and_data: tuple[str, dict[str, object]]) -> list[Entry]:
    return [Entry("s", i, k, d, None, AT) for i, (k, d) in enumerate(kinds_and_data, 1)]


def requested(execution_id: str, expires_at: datetime | None) -> tuple[str, dict[str, object]]:
    when = None if expires_at is None else expires_at.isoformat()
    return (log.APPROVAL_REQUESTED, {"execution_id": execution_id, "name": "refund",
                                     "expires_at": when})  # fmt: skip


PROMPT = (log.PROMPT, {"text": "refund A-1"})
STARTED = (log.TURN_STARTED, {"prompt": 1, "turn": "t"})
LATER = datetime.now(UTC) + timedelta(days=1)


@pytest.mark.parametrize(
    ("log_", "state"),
    [
        ([], "idle"),
        ([PROMPT], "running"),  # a prompt waits for its turn
        ([PROMPT, STARTED], "running"),
        ([PROMPT, STARTED, requested("x1", None)], "waiting for approval"),
        ([PROMPT, STARTED, requested("x1", LATER)], "waiting for approval"),
        ([PROMPT, STARTED, requested("x1", AT)], "running"),  # expired: its timeout denies it
        ([PROMPT, STARTED, requested("x1", None), (log.APPROVAL_DECIDED, {"execution_id": "x1"})],
         "running"),
        ([PROMPT, STARTED, (log.TURN_FINISHED, {"prompt": 1})], "idle"),
        ([PROMPT, STARTED, (log.TURN_FAILED, {"prompt": 1})], "failed"),
        ([PROMPT, STARTED, (log.TURN_STOPPED, {"prompt": 1})], "stopped"),
        ([PROMPT, STARTED, (log.TURN_FAILED, {"prompt": 1}), (log.PROMPT, {"text": "again"})],
         "running"),
    ],
)  # fmt: skip
def test_a_log_folds_into_its_state(log_: list[tuple[str, dict[str, object]]], state: str) -> None:
    summary = summarize("s", entries(*log_))
    assert summary.state == state and state in STATES


def test_the_command_line_and_the_inspector_say_the_same_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fxworld.web._summary import ActivityIndex

    db = tmp_path / "w.db"

    async def states_in_the_inspector() -> dict[str, str]:
        world = SqliteWorld(db)
        await seed(world)
        await world.append("s-stopped", [NewEntry("prompt", {"text": "stop it"})])
        fence = await world.acquire("s-stopped")
        ended = [log.entry(log.TURN_STARTED, prompt=1, turn="t"),
                 log.entry(log.TURN_STOPPED, prompt=1, turn="t", text="", reason=None)]  # fmt: skip
        await world.append("s-stopped", ended, fence=fence)
        index = ActivityIndex(world)
        await index.refresh_once()
        ordered, states, _ = index.states()
        await world.close()
        return {s.session_id: state for s, state in zip(ordered, states, strict=True)}

    inspector = asyncio.run(states_in_the_inspector())
    assert main(["sessions", "list", "--world", f"sqlite:///{db}"]) == 0
    rows = [re.split(r"\s{2,}", line) for line in capsys.readouterr().out.splitlines()]
    cli = {r[0]: r[1] for r in rows}
    assert cli == inspector
    assert set(cli.values()) == set(STATES)  # every state is in the comparison


def test_a_parent_whose_child_waits_for_approval_waits_for_approval_too() -> None:
    child_started = (log.CHILD_STARTED, {"execution_id": "x1", "session": "child-x1"})
    parent = summarize("p", entries(PROMPT, STARTED, child_started))
    child = summarize("child-x1", entries(PROMPT, STARTED, requested("y1", None)))
    states = {"child-x1": nested_state(child, lambda _: None)}
    assert parent.state == "running"  # its own log says only that it waits for a child
    assert nested_state(parent, states.get) == "waiting for approval"
    assert nested_state(parent, {"child-x1": "running"}.get) == "running"
    done = (log.CHILD_FINISHED, {"execution_id": "x1", "session": "child-x1"})
    finished = summarize("p", entries(PROMPT, STARTED, child_started, done))
    assert nested_state(finished, states.get) == "running"  # that child answered already
