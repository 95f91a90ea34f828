"""Pushes and agents (W19): :func:`send` passes the session's agent to a push that
takes it, and :class:`PerAgentPush` gives each agent its own queue.

A deployment with several agents on one world either shares one queue (every
message names its agent; each consumer leaves other agents' messages to their own
runners: docs/serverless.md) or gives each agent its own: a
:class:`PerAgentPush`, or a push URL with ``{agent}`` in it
(``sqs+https://.../wakes-{agent}``, ``vercel-queue://wakes-{agent}``,
``https://app.example/wake/{agent}``), sends each message to the queue of the
agent that owns the session, whichever process made the wake (a parent's run
that starts a child session of another agent, an approval decided in the
inspector).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping

from fxworld import validate
from fxworld.errors import ConfigurationError

from .base import Push

__all__ = ["PerAgentPush", "send", "takes_agent"]

_TAKES: dict[type, bool] = {}


def takes_agent(push: Push) -> bool:
    """Whether ``push.push`` accepts ``agent=`` (every push fxworld ships does; a
    push written before agents existed may not, and is called without it)."""
    kind = type(push)
    known = _TAKES.get(kind)
    if known is None:
        try:
            params = inspect.signature(push.push).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        known = "agent" in params or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
        )
        _TAKES[kind] = known
    return known


async def send(push: Push, session_id: str, *, delay: float, agent: str | None) -> None:
    """``push.push(session_id, delay=delay, agent=agent)``, without ``agent`` for a
    push that does not take it."""
    if agent is not None and takes_agent(push):
        await push.push(session_id, delay=delay, agent=agent)  # type: ignore[call-arg]
    else:
        await push.push(session_id, delay=delay)


class PerAgentPush:
    """One queue per agent: each message goes to the push of the agent that owns
    the session. ``pushes``: ``{agent name: Push}``, or a function that makes the
    push of a name (called once per name; :func:`~fxworld.push.push_from_url`
    makes one from a URL with ``{agent}``). ``default``: the push of a session
    whose agent is unknown (a world without owners) or has no entry; without one
    such a push fails (logged and counted; the tick sends it again)."""

    def __init__(
        self,
        pushes: Mapping[str, Push] | Callable[[str], Push],
        *,
        default: Push | None = None,
    ) -> None:
        self._make: Callable[[str], Push] | None = None
        self._pushes: dict[str, Push] = {}
        if callable(pushes) and not isinstance(pushes, Mapping):
            self._make = pushes
        else:
            for name, push in pushes.items():
                self._pushes[validate.agent_name(name)] = push
        self.default = default

    def __repr__(self) -> str:
        named = ", ".join(f"{k}: {v!r}" for k, v in self._pushes.items())
        return f"PerAgentPush({{{named}}}, default={self.default!r})"

    def push_for(self, agent: str | None) -> Push:
        """The push of ``agent``'s queue."""
        if agent is not None:
            push = self._pushes.get(agent)
            if push is None and self._make is not None:
                push = self._pushes[agent] = self._make(validate.agent_name(agent))
            if push is not None:
                return push
        if self.default is None:
            raise ConfigurationError(
                f"no queue for agent {agent!r}: give PerAgentPush an entry for it, or a default"
            )
        return self.default

    async def push(self, session_id: str, *, delay: float = 0.0, agent: str | None = None) -> None:
        await send(self.push_for(agent), session_id, delay=delay, agent=agent)

    async def close(self) -> None:
        for push in [*self._pushes.values(), *([self.default] if self.default else [])]:
            await push.close()
