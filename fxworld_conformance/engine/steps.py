"""Durable steps on the world under test: a ``@tool(resumable=True)`` call whose
worker crashed is run again by the next worker; a step that finished before the
crash returns its saved result without running, and a non-idempotent step that
started and did not finish gives the tool a clear error instead of running again.

The crash is the kit's in-process one (:class:`~fxworld_conformance.engine.bench.Crash`):
the first worker's task is cancelled inside the tool, its lease runs out
(:data:`~fxworld_conformance.engine.bench.CRASH_LEASE`), and a second worker of the
same agent takes the turn over."""

from __future__ import annotations

from typing import Any

import fxworld
from fxworld.errors import WorldError
from fxworld_conformance.engine.bench import Bench, Crash, Part, check

__all__ = ["SCENARIOS"]

SCENARIOS = Part("steps")

PAY = [{"tool": "pay", "input": {"order": "A-1"}}, "paid"]


class Effects:
    """What the steps did: each effect with the step key it was given, in order."""

    def __init__(self) -> None:
        self.done: list[tuple[str, str]] = []
        self.heard: list[str] = []

    async def charge(self, key: str) -> str:
        self.done.append(("charge", key))
        return f"ch-{len(self.done)}"

    async def email(self, key: str) -> str:
        self.done.append(("email", key))
        return f"em-{len(self.done)}"


async def crashed_then_taken_over(
    bench: Bench, agent: fxworld.Agent[Any], crash: Crash
) -> tuple[Any, list[Any]]:
    """Prompt ``agent``; its first worker crashes inside ``pay`` (at ``crash``); a
    second one ends the turn. The turn's answer and the session's log."""
    turn = agent.session("steps-1").prompt("Pay order A-1")
    await turn.accepted
    await bench.until_crashed(agent, crash)
    kinds = await bench.kinds("steps-1")
    check(
        "tool.started" in kinds and "tool.finished" not in kinds,
        f"the first worker crashed inside the tool, leaving its call unfinished: {kinds}",
    )
    answer = await bench.until_ended(agent, turn)
    return answer, await bench.log("steps-1")


@SCENARIOS("a step that finished before a crash returns its saved result without running")
async def finished_step_not_run_again(bench: Bench) -> None:
    effects, crash, runs = Effects(), Crash(), []

    @fxworld.tool(resumable=True)
    async def pay(order: str, ctx: fxworld.ToolContext) -> str:
        """Charge the order, then email the receipt."""
        runs.append(ctx.attempt)
        charged = await ctx.step("charge", effects.charge, ctx.step_key("charge"))
        crash()  # the first worker dies here, the charge saved
        emailed = await ctx.step("email", effects.email, ctx.step_key("email"))
        return f"{charged} {emailed}"

    answer, stored = await crashed_then_taken_over(bench, bench.agent(PAY, tools=[pay]), crash)
    check(answer == "paid", f"the turn ends with 'paid': {answer!r}")
    check(len(runs) == 2, f"the resumable call runs again after the crash: it ran {len(runs)}x")
    names = [name for name, _ in effects.done]
    check(names == ["charge", "email"], f"each effect once, charge first: {names}")
    check(
        len({key.rsplit(":", 1)[0] for _, key in effects.done}) == 1,
        f"both runs give the steps keys of one execution id: {effects.done}",
    )
    steps = [(e.kind, e.data.get("step")) for e in stored if e.kind.startswith("step.")]
    want = [("step.started", "charge"), ("step.finished", "charge")]
    want += [("step.started", "email"), ("step.finished", "email")]
    check(steps == want, f"each step saved once, started before finished: {steps}")
    result = [e.data.get("output") for e in stored if e.kind == "tool.finished"]
    check(result == ["ch-1 em-2"], f"the call returns the saved charge and the email: {result}")


@SCENARIOS("a step that started and did not finish is not run again; the tool hears why")
async def interrupted_step_is_an_error(bench: Bench) -> None:
    effects, crash, errors = Effects(), Crash(), []

    async def charge_and_die(key: str) -> str:
        await effects.charge(key)
        crash()  # the first worker dies inside the step, before it is saved
        return "never saved"

    @fxworld.tool(resumable=True)
    async def pay(order: str, ctx: fxworld.ToolContext) -> str:
        """Charge the order; say so when the charge may have partly run."""
        try:
            return str(await ctx.step("charge", charge_and_die, ctx.step_key("charge")))
        except WorldError as e:
            errors.append(e)
            return f"not charged again: {e}"

    answer, stored = await crashed_then_taken_over(bench, bench.agent(PAY, tools=[pay]), crash)
    check(answer == "paid", f"the turn ends with 'paid': {answer!r}")
    names = [name for name, _ in effects.done]
    check(names == ["charge"], f"the charge ran once, before the crash: {names}")
    check(len(errors) == 1, f"the re-run call gets one error from ctx.step: {errors}")
    error = errors[0]
    from fxworld.engine import StepInterrupted

    check(
        isinstance(error, StepInterrupted) and "'charge'" in str(error),
        f"the error is StepInterrupted and names the step: {type(error).__name__}: {error}",
    )
    kinds = [e.kind for e in stored if e.kind.startswith("step.")]
    check(kinds == ["step.started"], f"the step started once and never finished: {kinds}")
