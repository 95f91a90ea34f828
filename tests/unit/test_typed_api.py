"""``mypy --strict`` types the context and the answer (issue 39): ``ctx.context`` is
the agent's ``context_type`` where the tool says so, and ``await turn`` is the
agent's ``output_type`` (``str`` without one)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)

USER_CODE = """
import pydantic
from fxworld import Agent, ToolContext
from fxworld.testing import ScriptedModel

class Answer(pydantic.BaseModel):
    days: int

class Tenant(pydantic.BaseModel):
    tenant: str

def tenant_of(ctx: ToolContext[Tenant]) -> str:
    return ctx.context.tenant

def user_of(ctx: ToolContext) -> object:
    return ctx.context["user"]

async def main() -> None:
    typed = Agent(ScriptedModel([]), output_type=Answer)
    days: int = (await typed.session().prompt("When?")).days
    text: str = await Agent(ScriptedModel([])).session().prompt("Hi")
    wrong: str = await typed.session().prompt("When?")
"""


def test_mypy_types_the_context_and_the_answer(tmp_path: Path) -> None:
    from mypy import api

    user = tmp_path / "user_code.py"
    user.write_text(USER_CODE)
    out, _, status = api.run(
        ["--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), str(user)]
    )
    errors = [line for line in out.splitlines() if ": error:" in line]
    # only the one line that takes an Answer for a str
    wrong = (
        USER_CODE.splitlines().index('    wrong: str = await typed.session().prompt("When?")') + 1
    )
    assert len(errors) == 1 and f":{wrong}: error:" in errors[0], out
    assert 'expression has type "Answer"' in errors[0], out
    assert status == 1
