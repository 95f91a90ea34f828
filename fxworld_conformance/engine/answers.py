"""Typed answers on the world under test: a final answer validated against the
agent's ``output_type`` and saved with ``turn.finished``; an invalid one saved as
``output.invalid`` and the model asked again; after ``output_retries`` of them the
turn fails, saying why."""

from __future__ import annotations

import pydantic

import fxworld
from fxworld_conformance.engine.bench import Bench, Part, check

__all__ = ["SCENARIOS", "Refund"]

SCENARIOS = Part("answers")


class Refund(pydantic.BaseModel):
    """The typed answer the scenarios' agents must give."""

    order: str
    cents: int


VALID = '{"order": "A-1", "cents": 250}'


@SCENARIOS("a valid answer is returned typed and saved as JSON with turn.finished")
async def validated(bench: Bench) -> None:
    agent = bench.agent([VALID], output_type=Refund)
    turn = agent.session("ans-1").prompt("Refund order A-1")
    await bench.work(agent)
    answer = await turn
    check(answer == Refund(order="A-1", cents=250), f"await turn gives the Refund: {answer!r}")
    finished = [e for e in await bench.log("ans-1") if e.kind == "turn.finished"]
    outputs = [e.data.get("output") for e in finished]
    check(outputs == [{"order": "A-1", "cents": 250}], f"turn.finished carries the JSON: {outputs}")


@SCENARIOS("an invalid answer is saved as output.invalid and the model answers again")
async def invalid_then_retried(bench: Bench) -> None:
    agent = bench.agent(['{"order": "A-1"}', VALID], output_type=Refund, output_retries=2)
    turn = agent.session("ans-1").prompt("Refund order A-1")
    await bench.work(agent)
    stored = await bench.log("ans-1")
    kinds = [e.kind for e in stored if e.kind not in ("fence", "text")]
    want = ["prompt", "turn.started", "message", "output.invalid", "message", "turn.finished"]
    check(kinds == want, f"the refused answer is saved, then the next: {kinds}, not {want}")
    error = str(next(e for e in stored if e.kind == "output.invalid").data.get("error"))
    check("cents" in error, f"output.invalid names the missing field 'cents': {error!r}")
    answer = await turn
    check(answer == Refund(order="A-1", cents=250), f"the second answer is returned: {answer!r}")


@SCENARIOS("after output_retries refused answers the turn fails, naming the type")
async def bounded(bench: Bench) -> None:
    agent = bench.agent(["no", "still no", "never", VALID], output_type=Refund, output_retries=1)
    turn = agent.session("ans-1").prompt("Refund order A-1")
    await bench.work(agent)
    try:
        answer = await turn
    except fxworld.TurnFailed as e:
        told = str(e)
        check("Refund" in told and "2 tries" in told, f"the error names Refund and 2 tries: {e}")
    else:
        raise AssertionError(f"two refused answers with output_retries=1 fail the turn: {answer!r}")
    kinds = [e.kind for e in await bench.log("ans-1") if e.kind not in ("fence", "text")]
    check(
        kinds.count("message") == 2 and kinds.count("output.invalid") == 2,
        f"the model is asked twice and both answers are refused: {kinds}",
    )
    check(kinds[-1] == "turn.failed" and "turn.finished" not in kinds, f"the turn failed: {kinds}")
