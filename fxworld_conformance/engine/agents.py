"""Agents as tools on the world under test: a call of a tool made by
``agent.as_tool()`` runs one turn of that agent in a child session whose id is
derived from the call's ``execution_id`` (``child-<execution_id>``); the parent's
log names the child (``child.started``, ``child.finished``), the child's first
prompt names its parent (``parent``), and the parent's turn goes on with the
child's answer. A worker that crashes inside the child's turn leaves it to the
next worker, which ends it: the child's turn is started once. The child inherits
the parent's context (docs/engine.md, "Agents as tools").

One worker of the parent's agent runs both sessions (it knows every agent its
agent tools reach). The crash is the kit's in-process one
(:class:`~fxworld_conformance.engine.bench.Crash`), inside the child's tool."""

from __future__ import annotations

from typing import Any

import fxworld
from fxworld.types import Entry
from fxworld_conformance.engine.bench import Bench, Crash, Part, check

__all__ = ["SCENARIOS"]

SCENARIOS = Part("agents")

ASK = "When does order A-1 ship?"
TASK = "Find the shipping date of order A-1."
FOUND = "A-1 ships on 3 May."
FINAL = "Your order ships on 3 May."
ACME = {"tenant": "acme", "user": "u-17"}


def desk(bench: Bench, search: Any) -> fxworld.Agent[Any]:
    """The parent's agent: it asks the researcher (its agent tool ``research``),
    whose one call of ``search`` finds the date, then answers."""
    researcher = bench.agent(
        [{"tool": "search", "input": {"order": "A-1"}}, FOUND], tools=[search], name="researcher"
    )
    research = researcher.as_tool(name="research", description="Ask the researcher.")
    return bench.agent([{"tool": "research", "input": {"input": TASK}}, FINAL], tools=[research])


def kinds(entries: list[Entry]) -> list[str]:
    return [e.kind for e in entries if e.kind not in ("fence", "text")]


async def both_logs(bench: Bench, sid: str) -> tuple[list[Entry], list[Entry], dict[str, Any]]:
    """The parent's log, its one child's (the session ``child.started`` names),
    and that ``child.started``'s data."""
    parent = await bench.log(sid)
    started = [e.data for e in parent if e.kind == "child.started"]
    check(len(started) == 1, f"the parent's log names its child once: {kinds(parent)}")
    return parent, await bench.log(str(started[0].get("session"))), dict(started[0])


def ended_once(parent: list[Entry], child: list[Entry]) -> None:
    """Both turns ended once, the parent's after the child's answer came."""
    got = kinds(child)
    check(
        got.count("prompt") == 1 and got.count("turn.started") == 1,
        f"the child's turn is started once, from one prompt: {got}",
    )
    check(got.count("turn.finished") == 1, f"the child's turn finished once: {got}")
    answers = [e.data for e in parent if e.kind == "child.finished"]
    check(len(answers) == 1, f"the child reports its answer once: {kinds(parent)}")
    check(
        answers[0].get("output") == FOUND and answers[0].get("is_error") is False,
        f"child.finished holds the child's answer {FOUND!r}: {answers[0]}",
    )
    got = kinds(parent)
    check(
        got.count("turn.finished") == 1 and got[-1] == "turn.finished",
        f"the parent's turn goes on with the answer and finishes once: {got}",
    )


@SCENARIOS("a call runs one child turn in child-<execution_id>; each log names the other")
async def one_child_turn(bench: Bench) -> None:
    @fxworld.tool(idempotent=True)
    async def search(order: str) -> str:
        """Search the order system."""
        return f"{order}: ships 3 May"

    agent = desk(bench, search)
    turn = agent.session("agents-1").prompt(ASK)
    await bench.work(agent)
    parent, child, started = await both_logs(bench, "agents-1")
    calls = [e.data for e in parent if e.kind == "tool.started"]
    check(
        [c.get("name") for c in calls] == ["research"],
        f"the parent calls its agent tool once: {calls}",
    )
    xid = str(calls[0].get("execution_id"))
    check(
        started.get("session") == f"child-{xid}" and started.get("execution_id") == xid,
        f"child.started names the child session child-<execution_id> (child-{xid}): {started}",
    )
    check(
        bool(child) and child[0].kind == "prompt" and child[0].data.get("text") == TASK,
        f"the child's log begins with the call's input {TASK!r} as its prompt: {kinds(child)}",
    )
    named = child[0].data.get("parent")
    want = {"session": "agents-1", "execution_id": xid, "name": "research"}
    check(
        isinstance(named, dict) and {k: named.get(k) for k in want} == want,
        f"the child's first prompt names its parent {want}: {named}",
    )
    ended_once(parent, child)
    finished = next(e.data for e in parent if e.kind == "child.finished")
    check(
        finished.get("session") == started.get("session") and finished.get("execution_id") == xid,
        f"child.finished names the child and the call: {finished}",
    )
    answer = await turn
    check(answer == FINAL, f"the parent's turn ends with {FINAL!r}: {answer!r}")


@SCENARIOS("a crash inside the child's turn: both go on, the child's turn started once")
async def crash_in_the_child(bench: Bench) -> None:
    crash, runs = Crash(), []

    @fxworld.tool(idempotent=True)
    async def search(order: str, ctx: fxworld.ToolContext) -> str:
        """Search the order system (the first worker dies here)."""
        runs.append((ctx.session_id, ctx.attempt))
        crash()
        return f"{order}: ships 3 May"

    agent = desk(bench, search)
    turn = agent.session("agents-1").prompt(ASK)
    await turn.accepted
    await bench.until_crashed(agent, crash)
    parent, child, started = await both_logs(bench, "agents-1")
    check(
        "tool.started" in kinds(child) and "turn.finished" not in kinds(child),
        f"the first worker crashed inside the child's turn: {kinds(child)}",
    )
    check("child.finished" not in kinds(parent), f"no answer yet: {kinds(parent)}")
    answer = await bench.until_ended(agent, turn)
    check(answer == FINAL, f"the parent's turn ends with {FINAL!r}: {answer!r}")
    parent, child, started = await both_logs(bench, "agents-1")
    ended_once(parent, child)
    child_id = started.get("session")
    check(
        runs == [(child_id, 1), (child_id, 2)],
        f"the child's call runs again in the child ({child_id}), attempt 2: {runs}",
    )
    research = [e for e in parent if e.kind == "tool.started"]
    check(len(research) == 1, f"the parent's call is not run again: {kinds(parent)}")


@SCENARIOS("the child inherits the parent's context: in its first prompt, read by its tools")
async def context_inherited(bench: Bench) -> None:
    seen: list[Any] = []

    @fxworld.tool(idempotent=True)
    async def search(order: str, ctx: fxworld.ToolContext) -> str:
        """Search the tenant's order system."""
        seen.append(ctx.context)
        return f"{order}: ships 3 May"

    agent = desk(bench, search)
    turn = agent.session("agents-1", context=ACME).prompt(ASK)
    await bench.work(agent)
    parent, child, _ = await both_logs(bench, "agents-1")
    saved = child[0].data.get("context") if child else None
    check(saved == ACME, f"the child's first prompt holds the parent's context {ACME}: {saved}")
    check(seen == [ACME], f"the child's tool reads the parent's context {ACME}: read {seen}")
    ended_once(parent, child)
    answer = await turn
    check(answer == FINAL, f"the parent's turn ends with {FINAL!r}: {answer!r}")
