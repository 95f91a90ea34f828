"""Agents as tools: a call that runs a turn of another agent in a child session.

``other.as_tool(name=..., description=...)`` makes a :class:`~fxworld.engine.tools.Tool`
whose ``agent`` is ``other`` (:func:`agent_tool`). A call of it runs so that a
child turn is never started twice and the parent waits holding nothing:

1. The call's ``tool.started`` lands with the model's reply, as for any tool.
2. Its run makes the child session (``start_child`` of the worker's side): the
   call's ``input`` becomes the first prompt of session :func:`child_session_id`
   (derived from the call's ``execution_id``), appended only as the first entry of
   an empty log
   (W5), keyed ``prompt:<execution_id>`` (W6), with a wake (W7). The prompt
   carries ``parent`` (the call, the parent's log position ``at`` it was made
   at, and the path of agent tools from the worker's agent to the child's), the
   parent's context (the child inherits it: a tool of the child reads the same
   tenant), and the trace context of the call's ``execute_tool`` span (one trace
   holds both turns). A call run again after a crash finds its prompt under the
   key: the same child, never a second turn. The child's first entry is then
   read: a session of that id that this call did not make (a client's, under the
   same key) fails the call with an error the model hears.
3. ``child.started`` lands in the parent's log: the call waits for its child
   (:class:`~fxworld.engine.replay.WaitForChild`), and the parent's run finishes
   its wake and holds nothing, as for an approval, however long the child takes.
4. A worker of the parent's agent takes the child's wake and runs it with the
   child's agent, found from the path (:func:`agent_for`). Before the child's
   first turn starts, it reads the parent's log from ``at``: a parent deleted,
   whose turn ended or was asked to stop, or whose call has its result (a
   replaced parent's worker made the child late) ends the child's turn at once,
   stopped, with no model call. When the child's first
   turn has ended, the worker appends ``child.finished`` to the parent's log
   (``report_to_parent``: unfenced, keyed ``child:<execution_id>``, with a
   wake, and with ``expect=`` the parent's last seq: never to a deleted parent,
   never making a session) BEFORE it finishes the child's wake: a worker that dies in between
   leaves that wake to be delivered again, and the next run reports it (the key
   writes it once).
5. The parent's worker wakes; the child's answer is the call's result.

``stop.requested`` on the parent's turn is passed on to every child it waits for
(``stop_children``) before ``turn.stopped`` ends it; deleting the parent
(:func:`~fxworld.engine.session.delete_session`, behind ``Session.delete``)
stops them too. The worker's side (``fxworld.engine._run.children``) says why
each of these holds with a worker stalled anywhere. An approval inside the
child is the child's own: decided on the child session like any other, while the
parent waits for the child's answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

from fxworld.errors import InvalidArgument
from fxworld.models.base import Model
from fxworld.protocol import World

from .replay import TurnState
from .tools import Tool

__all__ = [
    "AgentParts",
    "INPUT_SCHEMA",
    "agent_tool",
    "child_session_id",
    "child_key",
    "is_child_session_id",
    "open_children",
    "agent_for",
    "no_agent",
]

INPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "input": {"type": "string", "description": "What to ask the agent, in plain words."}
    },
    "required": ["input"],
}
"""The input of an agent tool: the text of the child session's first prompt."""


class AgentParts(Protocol):
    """What a worker reads of its agent (an :class:`~fxworld.engine.agent.Agent`
    has it all): its name, the model, the tools, the instructions, a turn's settings."""

    name: str
    model: Model
    tools: dict[str, Tool]
    instructions: str
    model_retries: int
    max_deliveries: int
    text_chunk_chars: int
    text_chunk_interval: float
    context_type: type[Any] | None
    show_context: bool | Callable[[Any], str]
    output_type: type[Any] | None
    output_retries: int
    max_model_calls: int | None
    max_depth: int

    async def ready(self) -> World: ...


def child_session_id(execution_id: str) -> str:
    """The id of the child session a call of an agent tool runs in: derived from
    its ``execution_id``, so every run of the call finds the same child."""
    return f"child-{execution_id}"


def is_child_session_id(session_id: str) -> bool:
    """Whether ``session_id`` has the form of :func:`child_session_id`: reserved for
    the child sessions of agent tools (the web app refuses to create one)."""
    return session_id.startswith(child_session_id(""))


def child_key(execution_id: str) -> str:
    """The idempotency key of the ``child.finished`` a child appends to its parent."""
    return f"child:{execution_id}"


def open_children(cur: TurnState | None, tools: Mapping[str, Tool] | None) -> list[str]:
    """The child sessions the open calls of turn ``cur`` wait for, or may have
    made already: calls with ``child.started``, and started calls of an agent tool
    (of ``tools``; ``None``: any started call, whose child may not exist)."""
    if cur is None:
        return []
    found = []
    for c in cur.calls:
        tool = None if tools is None else tools.get(c.name)
        is_agent = tools is None or (tool is not None and tool.agent is not None)
        agent_call = c.started > 0 and is_agent
        if not c.resolved and (c.child is not None or agent_call):
            found.append(c.child or child_session_id(c.execution_id))
    return found


def _not_called(**_: Any) -> Any:
    raise InvalidArgument("an agent tool runs only inside a turn of a worker")


def agent_tool(agent: AgentParts, name: str, description: str) -> Tool:
    """A tool whose calls run a turn of ``agent`` in a child session."""
    return Tool(
        name=name,
        description=description,
        input_schema=INPUT_SCHEMA,
        fn=_not_called,
        agent=agent,
    )


def agent_for(root: AgentParts, path: Sequence[str]) -> AgentParts | None:
    """The agent at the end of ``path`` from ``root`` (``None``: no agent tool there)."""
    agent = root
    for name in path:
        t = agent.tools.get(name)
        if t is None or t.agent is None:
            return None
        agent = t.agent
    return agent


def no_agent(path: Sequence[str]) -> str:
    """Why a child session whose agent is not found cannot run."""
    return (
        f"no agent runs this child session: the worker's agent has no agent tool at "
        f"{' > '.join(path)!r} (a deploy without it?)"
    )
