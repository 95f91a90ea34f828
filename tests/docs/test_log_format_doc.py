"""docs/log-format.md documents every entry kind the engine writes, and no other.

The kinds are the string constants of ``fxworld.engine.log`` (the log format's one
source in code: every entry the engine writes is made by ``log.entry`` with one of
them). Each must have its row in the doc's table of entry kinds, marked ``(v N)``
when it needs a reader of version N > 1 (the ``v`` that ``log.entry`` gives it); a
row for a kind the code does not have is stale.
"""

from __future__ import annotations

import re
from pathlib import Path

from fxworld.engine import log

DOC = Path(__file__).resolve().parents[2] / "docs" / "log-format.md"

_ROW = re.compile(r"^\| `([a-z.]+)`(?: \(v (\d+)\))? \|", re.M)


def code_kinds() -> dict[str, int]:
    """Each kind the engine can write -> the log version its entries carry."""
    kinds = [getattr(log, name) for name in log.__all__]
    return {k: int(log.entry(k).data["v"]) for k in kinds if isinstance(k, str)}


def doc_kinds(text: str) -> dict[str, int]:
    """Each kind of the doc's table of entry kinds -> the version its row names (1: none)."""
    table = text.split("## Entry kinds", 1)[1].split("\n## ", 1)[0]
    return {kind: int(v or 1) for kind, v in _ROW.findall(table)}


def differences(code: dict[str, int], doc: dict[str, int]) -> list[str]:
    """What the doc gets wrong about ``code``, one line each."""
    found = [f"{k!r} is written by the engine but not documented" for k in code if k not in doc]
    found += [f"{k!r} is documented but the engine has no such kind" for k in doc if k not in code]
    found += [
        f"{k!r} is version {code[k]}, the doc says {doc[k]}"
        for k in code
        if k in doc and code[k] != doc[k]
    ]
    return found


def test_every_kind_the_engine_writes_is_documented_with_its_version() -> None:
    code = code_kinds()
    assert {"prompt", "output.invalid", "step.started", "step.finished"} <= set(code)
    assert differences(code, doc_kinds(DOC.read_text())) == []


def test_the_comparison_finds_an_undocumented_kind_a_stale_row_and_a_wrong_version() -> None:
    text = DOC.read_text()
    doc = doc_kinds(text)
    assert doc_kinds(re.sub(r"^\| `output\.invalid` .*\n", "", text, flags=re.M)) == {
        k: v for k, v in doc.items() if k != "output.invalid"
    }
    without = {k: v for k, v in doc.items() if k != "step.finished"}
    assert differences(code_kinds(), without) == [
        "'step.finished' is written by the engine but not documented"
    ]
    assert differences({"prompt": 1}, {"prompt": 1, "gone": 1}) == [
        "'gone' is documented but the engine has no such kind"
    ]
    assert differences({"prompt": 2}, {"prompt": 1}) == ["'prompt' is version 2, the doc says 1"]


def _row(text: str, kind: str) -> str:
    """The row of ``kind`` in the doc's table of entry kinds."""
    table = text.split("## Entry kinds", 1)[1].split("\n## ", 1)[0]
    [row] = [line for line in table.splitlines() if line.startswith(f"| `{kind}`")]
    return row


def _docstring(kind: str) -> str:
    """The docstring of ``kind``'s constant in ``fxworld/engine/log.py``."""
    source = (DOC.parents[1] / "fxworld" / "engine" / "log.py").read_text()
    const = kind.upper().replace(".", "_")
    return source.split(f'{const}: Final = "{kind}"', 1)[1].split(": Final = ", 1)[0]


async def test_every_field_of_a_decision_and_a_stop_is_documented() -> None:
    """The fields an approval, a denial and a stop are written with (``actor`` and
    ``note`` among them) are each named in their kind's row and in ``log.py``."""
    import asyncio

    from fxworld import Agent, MemoryWorld, tool
    from fxworld.testing import ScriptedModel

    @tool(needs_approval=True)
    def refund(id: str) -> str:
        """Refund."""
        return "ok"

    fields: dict[str, set[str]] = {}
    for act in ("approve", "deny"):
        model = ScriptedModel([{"tool": "refund", "input": {"id": "A"}}])
        agent = Agent(model, tools=[refund], world=MemoryWorld())
        session = agent.session(act)
        await session.prompt("Refund A.").accepted
        await asyncio.wait_for(agent.work(until_idle=True), 30)
        [waiting] = await session.pending_approvals()
        await getattr(session, act)(waiting.execution_id, "said", actor="alice")
        await session.stop("enough", actor="alice")
        for e in await session.read():
            if e.kind in (log.APPROVAL_DECIDED, log.STOP_REQUESTED):
                fields.setdefault(e.kind, set()).update(set(e.data) - {"v"})
    assert {"actor", "note", "reason"} <= fields[log.APPROVAL_DECIDED]
    assert "actor" in fields[log.STOP_REQUESTED]
    text = DOC.read_text()
    for kind, names in fields.items():
        row, docstring = _row(text, kind), _docstring(kind)
        for name in names:
            assert f"`{name}`" in row, f"{kind}'s row in log-format.md lacks {name!r}"
            assert f'"{name}"' in docstring, f"{kind}'s docstring in log.py lacks {name!r}"
