"""Per-session context on the world under test: saved with the session's first
prompt and read by every tool; a different context refused with nothing written;
kept by a fork and carried by a copy to another world."""

from __future__ import annotations

from typing import Any

import fxworld
from fxworld.errors import ContextMismatch, InvalidContext
from fxworld_conformance.engine.bench import Bench, Part, check

__all__ = ["SCENARIOS"]

SCENARIOS = Part("context")

ACME = {"tenant": "acme", "user": "u-17"}
GLOBEX = {"tenant": "globex", "user": "u-4"}


def whoami_agent(bench: Bench, seen: list[Any]) -> Any:
    """An agent whose turns (two per session) call ``whoami``, which notes the
    context it reads."""

    @fxworld.tool
    async def whoami(ctx: fxworld.ToolContext) -> str:
        """Who the session serves."""
        seen.append(ctx.context)
        return str(ctx.context.get("user"))

    return bench.agent([{"tool": "whoami", "input": {}}, "done"] * 2, tools=[whoami])


@SCENARIOS("saved with the first prompt, read by every tool of every turn")
async def saved_and_seen(bench: Bench) -> None:
    seen: list[Any] = []
    agent = whoami_agent(bench, seen)
    first = agent.session("ctx-1", context=ACME).prompt("one")
    await first.accepted
    stored = await bench.log("ctx-1")
    check(
        stored[0].kind == "prompt" and stored[0].data.get("context") == ACME,
        f"the first prompt is saved with the context {ACME}: it holds {stored[0].data}",
    )
    await bench.work(agent)
    second = agent.session("ctx-1").prompt("two")  # no context given: the saved one
    await bench.work(agent)
    check(await first == "done" and await second == "done", "both turns end with 'done'")
    check(seen == [ACME, ACME], f"each tool call reads the saved context {ACME}: read {seen}")
    contexts = [e.data.get("context") for e in await bench.log("ctx-1") if e.kind == "prompt"]
    check(contexts == [ACME, None], f"only the first prompt holds the context: {contexts}")


@SCENARIOS("a different context, or one that is not a JSON object, is refused; nothing is written")
async def mismatch_refused(bench: Bench) -> None:
    agent = bench.agent(["done"])
    try:
        agent.session("ctx-new", context=["acme"])
    except InvalidContext:
        pass
    else:
        raise AssertionError("a context that is not a JSON object raises InvalidContext")
    check(await bench.log("ctx-new") == [], "a refused context writes nothing")
    await agent.session("ctx-1", context=ACME).prompt("one").accepted
    before = await bench.log("ctx-1")
    try:
        await agent.session("ctx-1", context=GLOBEX).prompt("two").accepted
    except ContextMismatch:
        pass
    else:
        raise AssertionError("a prompt with another context than the saved one: no ContextMismatch")
    after = await bench.log("ctx-1")
    check(
        after == before,
        f"a refused prompt writes nothing: the log went from {len(before)} to {len(after)} entries",
    )
    await agent.session("ctx-1", context=dict(reversed(ACME.items()))).prompt("three").accepted
    check(len(await bench.log("ctx-1")) == len(before) + 1, "the same context is accepted again")


@SCENARIOS("a fork keeps it, and its tools read it; a copy to another world carries it")
async def fork_and_copy(bench: Bench) -> None:
    seen: list[Any] = []
    agent = whoami_agent(bench, seen)
    turn = agent.session("ctx-1", context=ACME).prompt("one")
    await bench.work(agent)
    await turn
    fork = await agent.session("ctx-1").fork(id="ctx-fork")
    kept = await fork.saved_context()
    check(kept == ACME, f"the fork keeps the context {ACME}: it has {kept}")
    forked = fork.prompt("again")
    await bench.work(agent)
    check(await forked == "done", "the fork's turn ends with 'done'")
    check(seen == [ACME, ACME], f"the fork's tool reads the context: read {seen}")

    from fxworld.moving import copy_session  # it loads the engine: only when the tier runs

    other = await bench.other_world()
    await copy_session(bench.world, other, "ctx-fork")
    copied = await bench.agent([], world=other).session("ctx-fork").saved_context()
    check(copied == ACME, f"a copy of the fork carries the context {ACME}: it has {copied}")
