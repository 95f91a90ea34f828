"""Which agent owns a session, and who may prompt and run it (docs/engine.md,
"Many agents, one world").

Each session belongs to one agent, named by ``Agent(name=...)``. The first prompt
records it: on a world with the seam (:class:`~fxworld.protocol.AgentRouter`) by
``claim`` before the prompt is appended, and always in the prompt entry itself
(``data["agent"]``, docs/log-format.md). A world without the seam knows the owner
from the log alone (:func:`fxworld.wakes.owner_in_log`).

- :func:`check_prompt`: a prompt through an agent that does not own the session
  raises :class:`~fxworld.errors.WrongAgent` before anything is written; a session
  with no owner (new, or written before owners were recorded) is claimed.
- :func:`run_owner`: what a worker does before it runs a session: it finds (or, for
  a session with no owner, claims) the owner, and runs the session only if the
  owner is its agent or an agent its agent reaches through agent tools
  (:func:`served`); otherwise it hands the wake back untouched.
- :func:`rename_agent`: a one-off move of every session of one agent to another
  name, for a world that can (every first-party world with the seam).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from fxworld import validate
from fxworld.errors import ConfigurationError, LeaseLost, WrongAgent
from fxworld.protocol import AgentRouter, World
from fxworld.types import WakeLease
from fxworld.wakes import owner_in_log

__all__ = [
    "served",
    "owner_of",
    "check_prompt",
    "claim_for",
    "run_owner",
    "hand_back",
    "rename_agent",
]


async def owner_of(world: World, session_id: str) -> str | None:
    """The session's owner: the world's record (with the seam), else the log's."""
    if isinstance(world, AgentRouter):
        return await world.owner(session_id)
    return await owner_in_log(world, session_id)


async def claim_for(world: World, session_id: str, agent: str) -> str:
    """Make ``agent`` the owner of a session that has none; the owner now. Without
    the seam nothing is recorded here: the prompt's ``agent`` field is the record."""
    if isinstance(world, AgentRouter):
        return await world.claim(session_id, agent)
    return await owner_in_log(world, session_id) or agent


async def check_prompt(world: World, session_id: str, agent: str) -> None:
    """Before a prompt is appended: claim the session for ``agent`` if it has no
    owner; :class:`~fxworld.errors.WrongAgent` if another agent owns it."""
    owner = await claim_for(world, session_id, agent)
    if owner != agent:
        raise WrongAgent(session_id, owner, agent)


def served(root: Any) -> dict[str, Any]:
    """The agents a worker of ``root`` runs, by name: ``root`` and every agent it
    reaches through agent tools (their code is in its process). A name held by two
    agents keeps the nearer one; the child's own path picks the right one when a
    child session runs (``agent_for``)."""
    found: dict[str, Any] = {}
    seen: set[int] = set()
    todo = [root]
    while todo:
        agent = todo.pop(0)
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        name = getattr(agent, "name", None)
        if isinstance(name, str):
            found.setdefault(name, agent)
        tools: Mapping[str, Any] = getattr(agent, "tools", {})
        todo.extend(t.agent for t in tools.values() if getattr(t, "agent", None) is not None)
    return found


async def run_owner(world: World, wake: WakeLease, natural: str) -> str:
    """The owner of the session of ``wake``: the one the take found; else the
    world's record, claimed now for the agent its log names, or for ``natural``
    (the agent that would run it) when it names none (a session written before
    owners were recorded). The caller runs the session only if
    the owner is one of its agents, and otherwise hands the wake back
    (:func:`hand_back`)."""
    if wake.agent is not None:
        return wake.agent
    named = await owner_in_log(world, wake.session_id)  # prompted through a world
    return await claim_for(world, wake.session_id, named or natural)  # that kept no record


async def hand_back(world: World, wake: WakeLease) -> None:
    """Give back a wake a worker may not run (another agent's session): due again
    at once for its own agent's workers (``wake`` first, then ``finish_wake``, so
    by W13 it is never lost, even if this process dies in between)."""
    await world.wake(wake.session_id, delay=0.0)
    with contextlib.suppress(LeaseLost):
        await world.finish_wake(wake)


async def rename_agent(world: World, old: str, new: str) -> int:
    """Give every session of agent ``old`` to agent ``new`` (after renaming
    ``Agent(name=old)`` to ``Agent(name=new)`` in the code); returns how many
    sessions moved. Run it once, with no worker of either name running. Past prompts
    keep the name they were sent with (the log is history); from then on only
    ``new`` prompts and runs them. Needs a world with the seam that can rename
    (memory, SQLite, PostgreSQL, Redis, S3, and an EncryptedWorld over one of them); otherwise
    ``ConfigurationError``."""
    was, now = validate.agent_name(old), validate.agent_name(new)
    renamer = getattr(world, "rename_agent", None)
    if renamer is None:
        raise ConfigurationError(
            f"{type(world).__name__} cannot rename an agent's sessions "
            "(it has no rename_agent): keep the old name, Agent(name=...)"
        )
    moved: int = await renamer(was, now)
    return moved
