"""The engine tier has teeth: an engine broken in one place (patched here, in this
process, where the tier runs) fails the scenario of that place, naming the engine
and saying what it did; the same scenarios pass the engine as it is. At least one
broken engine per part: context, typed answers, durable steps, agents as tools."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from fxworld.engine import fork, log, session, steps
from fxworld.engine._run import children, run
from fxworld.engine._run import turn_edges as turn_step
from fxworld.engine.replay import StartTurn
from fxworld.types import NewEntry
from fxworld_conformance.engine import SCENARIOS
from fxworld_conformance.engine.bench import Bench, EngineScenario, Part
from fxworld_conformance.report import ENGINE
from fxworld_conformance.runner import by_guarantee, run_check, run_engine_one
from fxworld_conformance.target import Target

Patch = Callable[[pytest.MonkeyPatch], None]


def tools_read_no_context(mp: pytest.MonkeyPatch) -> None:
    mp.setattr("fxworld.engine._run.state.parse_context", lambda data, context_type: {})


def any_context_accepted(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(session, "same_context", lambda saved, given: True)


def fork_drops_the_context(mp: pytest.MonkeyPatch) -> None:
    real = log.entry

    def entry(kind: str, **data: Any) -> NewEntry:
        if kind == log.FORKED:
            data.pop("context", None)
        return real(kind, **data)

    mp.setattr(fork.log, "entry", entry)


def output_not_saved(mp: pytest.MonkeyPatch) -> None:
    real = turn_step.answer_entries

    def without_output(run: Any, call: str, text: str) -> list[NewEntry]:
        return [NewEntry(e.kind, {k: v for k, v in e.data.items() if k != "output"})
                for e in real(run, call, text)]  # fmt: skip

    mp.setattr("fxworld.engine._run.model_call.answer_entries", without_output)


def any_json_object_accepted(mp: pytest.MonkeyPatch) -> None:
    def unchecked(output_type: Any, text: str) -> tuple[Any, str]:
        try:
            value = json.loads(text)
        except ValueError:
            return None, "not JSON"
        return (value, "") if isinstance(value, dict) else (None, "not an object")

    mp.setattr(turn_step, "check_output", unchecked)


def retries_unbounded(mp: pytest.MonkeyPatch) -> None:
    real = turn_step.answer_entries
    mp.setattr(
        "fxworld.engine._run.model_call.answer_entries",
        lambda run, call, text: [e for e in real(run, call, text) if e.kind != log.TURN_FAILED],
    )


def finished_steps_run_again(mp: pytest.MonkeyPatch) -> None:
    real = steps.StepJournal.run

    async def run(self: steps.StepJournal, *args: Any, **kwargs: Any) -> Any:
        self.call.step_results.clear()
        self.call.steps_started.clear()
        return await real(self, *args, **kwargs)

    mp.setattr(steps.StepJournal, "run", run)


def started_steps_run_again(mp: pytest.MonkeyPatch) -> None:
    real = steps.StepJournal.run

    async def run(self: steps.StepJournal, name: str, fn: Any, a: Any, kw: Any, idem: bool) -> Any:
        return await real(self, name, fn, a, kw, True)  # every step taken as idempotent

    mp.setattr(steps.StepJournal, "run", run)


def child_id_not_derived(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(children, "child_session_id", lambda execution_id: f"child-{uuid.uuid4().hex}")


def child_turn_started_again(mp: pytest.MonkeyPatch) -> None:
    real = run.give_up_if_redelivered

    async def start_again(r: Any) -> None:  # a child's turn taken over begins anew
        cur = r.state.current
        if cur is not None and r.state.parent is not None:
            await turn_step.start_turn(r, StartTurn(cur.prompt))
        await real(r)

    mp.setattr(run, "give_up_if_redelivered", start_again)


def child_context_not_inherited(mp: pytest.MonkeyPatch) -> None:
    real = log.entry

    def entry(kind: str, **data: Any) -> NewEntry:
        if kind == log.PROMPT and "parent" in data:
            data.pop("context", None)
        return real(kind, **data)

    mp.setattr(children.log, "entry", entry)


BROKEN: list[tuple[str, Patch, str]] = [
    ("context-saved-and-seen", tools_read_no_context, "each tool call reads the saved context"),
    ("context-mismatch-refused", any_context_accepted, "no ContextMismatch"),
    ("context-fork-and-copy", fork_drops_the_context, "the fork keeps the context"),
    ("answers-validated", output_not_saved, "await turn gives the Refund"),
    ("answers-invalid-then-retried", any_json_object_accepted, "the refused answer is saved"),
    ("answers-bounded", retries_unbounded, "fail the turn"),
    ("steps-finished-step-not-run-again", finished_steps_run_again, "each effect once"),
    ("steps-interrupted-step-is-an-error", started_steps_run_again, "the charge ran once"),
    ("agents-one-child-turn", child_id_not_derived, "child-<execution_id>"),
    ("agents-crash-in-the-child", child_turn_started_again, "the child's turn is started once"),
    ("agents-context-inherited", child_context_not_inherited, "holds the parent's context"),
]
"""Scenario id, the engine broken for it, and what its failure must say."""

BY_ID = {s.id: s for s in SCENARIOS}


def test_every_engine_scenario_has_a_broken_engine() -> None:
    assert sorted(i for i, _, _ in BROKEN) == sorted(BY_ID)


@pytest.mark.parametrize(("scenario", "patch", "says"), BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_engine_fails_its_scenario(
    scenario: str, patch: Patch, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    patch(monkeypatch)
    [row] = run_check(BY_ID[scenario].name, Target(url="memory://"))
    assert row.status == "failed", f"{scenario} passed an engine broken by {patch.__name__}"
    assert row.guarantees == (ENGINE,)
    assert says in row.detail, row.detail
    assert by_guarantee([row])[ENGINE][0] == "failed"
    assert by_guarantee([row])["W1"][0] == "skipped"  # no guarantee of the world is blamed


def test_the_engine_as_it_is_passes_every_scenario_on_memory() -> None:
    for s in SCENARIOS:
        [row] = run_check(s.name, Target(url="memory://"))
        assert row.status == "passed", f"{s.id}: {row.detail}"


def test_a_bug_of_the_kit_in_an_engine_scenario_is_a_kit_error_not_a_failure() -> None:
    async def buggy(bench: Bench) -> None:
        agent = bench.agent(["done"])
        await agent.session("s-1").prompt("hi").accepted
        Part("context")("a nameless scenario")(lambda b: agent.work())  # raises in the kit

    row = run_engine_one(EngineScenario("context-buggy", "engine context: buggy", "context", buggy),
                         Target(url="memory://"))  # fmt: skip
    assert row.status == "error" and row.guarantees == (), row
    assert "kit error" in row.detail and "ValueError" in row.detail
