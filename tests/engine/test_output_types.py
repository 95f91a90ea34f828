"""``Agent(output_type=...)`` takes any type Pydantic validates, not only a model:
``list[str]``, ``int``, a dataclass, a ``Literal``; the model is asked for
``{"response": ...}`` and ``await turn`` returns the value itself."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Literal

import pytest

from fxworld import Agent, MemoryWorld
from fxworld.engine import TurnFailed
from fxworld.errors import ConfigurationError
from fxworld.testing import ScriptedModel, read_recording


@dataclasses.dataclass
class Refund:
    order: str
    cents: int


@pytest.mark.parametrize(
    ("output_type", "reply", "value"),
    [
        (list[str], {"response": ["a", "b"]}, ["a", "b"]),
        (int, {"response": 42}, 42),
        (Refund, {"response": {"order": "A-1", "cents": 250}}, Refund("A-1", 250)),
        (Literal["yes", "no"], {"response": "no"}, "no"),
    ],
)
async def test_any_type_pydantic_validates_is_an_answer(
    output_type: Any, reply: dict[str, Any], value: Any, tmp_path: Path
) -> None:
    world = MemoryWorld()
    heard = tmp_path / "heard.jsonl"
    agent = Agent(
        ScriptedModel([json.dumps(reply)], record_to=heard), world=world, output_type=output_type
    )
    turn = agent.session().prompt("Answer.")
    await agent.work(until_idle=True)
    assert await turn == value
    [finished] = [
        e for e in await agent.session(turn.session_id).read() if e.kind == "turn.finished"
    ]
    assert finished.data["output"] == reply  # saved whole, as the JSON the model gave
    told = read_recording(heard)[0]["instructions"]
    assert '"response"' in told  # the model is asked for the wrapped value


async def test_a_wrapped_answer_that_does_not_fit_is_asked_again_then_fails_naming_the_type() -> (
    None
):
    agent = Agent(
        ScriptedModel(['{"response": "many"}', '{"response": ["x", 1]}']),
        world=MemoryWorld(),
        output_type=list[int],
        output_retries=1,
    )
    turn = agent.session().prompt("Numbers?")
    await agent.work(until_idle=True)
    with pytest.raises(TurnFailed, match=r"did not match list\[int\] after 2 tries"):
        await turn


@pytest.mark.parametrize("bad", [object(), 3, "list[str]"])
def test_an_output_type_pydantic_cannot_validate_is_refused_when_the_agent_is_made(
    bad: Any,
) -> None:
    with pytest.raises(ConfigurationError, match="output_type must be a type Pydantic validates"):
        Agent(ScriptedModel(["x"]), world=MemoryWorld(), output_type=bad)
