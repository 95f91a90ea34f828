"""What every step handler is handed: :class:`RunState`.

A run of one session's wake maps each step :func:`~fxworld.engine.replay.next_step`
decides to one handler (:mod:`fxworld.engine._run.run`). A handler decides and acts
through its context: the writer (the only way to the world, holding the state),
the agent's parts, and the run's signals.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from fxworld.models.base import ToolSpec

from ..context import context_instructions, parse_context
from ..replay import Replay, Step, next_step
from ..subagents import AgentParts
from ..telemetry import OFF, RunTelemetry
from ..typed_output import output_instructions
from .fenced import FencedWriter
from .signals import Signals

__all__ = ["RunState", "new_id"]


def new_id(chars: int = 16) -> str:
    """A new random id of ``chars`` (even) hex digits: a model call's, a turn's, a
    call's ``execution_id`` (32)."""
    return os.urandom(chars // 2).hex()


class RunState:
    """One run's writer (and through it the state), agent and signals; with what
    every step asks of the tools, worked out once per run.

    ``path``: for a child session, the agent tools that lead from the worker's
    agent to this one (:mod:`fxworld.engine.subagents`); ``()`` otherwise.
    ``refusal``: why no turn of this session can run here (no agent found for a
    child session): its turns fail at once with it ("": they run).
    """

    def __init__(
        self,
        writer: FencedWriter,
        agent: AgentParts,
        signals: Signals,
        *,
        path: tuple[str, ...] = (),
        refusal: str = "",
    ) -> None:
        self.writer = writer
        self.agent = agent
        self.signals = signals
        self.path = path
        self.refusal = refusal
        self.telemetry: RunTelemetry = OFF
        """Its spans and metrics (:mod:`fxworld.engine.telemetry`)."""
        tools = agent.tools
        self.tool_specs: tuple[ToolSpec, ...] = tuple(t.spec for t in tools.values())
        """The tools as the model sees them."""
        self.idempotent: Mapping[str, bool] = {n: t.reruns for n, t in tools.items()}
        """Whether a call found started runs again (:attr:`~fxworld.engine.tools.Tool.reruns`)."""
        self.approval_timeouts: Mapping[str, float | None] = {
            n: t.approval_timeout for n, t in tools.items() if t.needs_approval
        }
        """The tools that need approval, each with its timeout."""
        self._context: Any = None
        self._instructions: str | None = None

    @property
    def state(self) -> Replay:
        """The session as far as the log goes (kept by the writer)."""
        return self.writer.state

    @property
    def context(self) -> Any:
        """The session's context as its tools read it (parsed once: it never changes);
        ``pydantic.ValidationError`` when it does not fit the agent's ``context_type``."""
        if self._context is None:
            self._context = parse_context(self.state.context, self.agent.context_type)
        return self._context

    @property
    def instructions(self) -> str:
        """The model's instructions: the agent's, then what it is told of the
        answer's type and of the context, if anything (worked out once)."""
        if self._instructions is None:
            agent = self.agent
            parts = [agent.instructions]
            if agent.output_type is not None:
                parts.append(output_instructions(agent.output_type))
            if agent.show_context is not False:
                parts.append(context_instructions(agent.show_context, self.context))
            self._instructions = "\n\n".join(p for p in parts if p)
        return self._instructions

    @property
    def sid(self) -> str:
        return self.writer.sid

    def next_step(self) -> Step:
        """What to do next, from the state (:func:`~fxworld.engine.replay.next_step`)."""
        return next_step(self.writer.state, self.idempotent, self.approval_timeouts)
