"""What a run's telemetry does when the application set a tracer or meter provider.

:func:`for_run` gives a run :class:`OtelRun` then (else
:data:`~fxworld.engine.telemetry.OFF`): its turn spans (``invoke_agent``), the
``chat`` and ``execute_tool`` spans under them, and the metrics
(:class:`~fxworld.engine.telemetry.Instruments`). Every OpenTelemetry import here runs only once the
application has imported OpenTelemetry itself. ``docs/observability.md`` lists
every span, attribute and metric.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, Final

from fxworld.models.base import Model, ModelResponse
from fxworld.types import Entry, Fence, WakeLease

from ..replay import CallState, Replay, StartTurn, Step
from ..telemetry import (
    OFF,
    TRACE_FIELD,
    Call,
    RunTelemetry,
    capture_content,
    providers,
)

__all__ = ["OtelRun", "for_run"]


def for_run(agent_name: str, wake: WakeLease) -> RunTelemetry:
    """The telemetry of one run of ``wake``: :data:`OFF` unless the application set
    a provider."""
    tracer, instruments = providers()
    if tracer is None and instruments is None:
        return OFF
    return OtelRun(tracer, instruments, agent_name, wake)


_DUE_AT_ONCE: Final = frozenset({"prompt", "approval.decided", "stop.requested", "turn.yielded"})


def _due_at_once(e: Entry) -> bool:
    """Whether ``e`` was appended with a wake due at once (so the wake was due at
    ``e.at``): a prompt, a person's decision, a stop, a yield."""
    return e.kind in _DUE_AT_ONCE and e.data.get("expired") is not True


def _outcome(kind: str | None) -> str:
    return (kind or "turn.finished").removeprefix("turn.")


class OtelRun(RunTelemetry):
    """The telemetry of one run when a tracer or a meter provider is set."""

    def __init__(self, tracer: Any, instruments: Any, agent: str, wake: WakeLease) -> None:
        from opentelemetry import trace

        self.api = trace
        self.tracer = tracer
        self.m = instruments
        self.agent = agent
        self.sid = wake.session_id
        self.takeover = wake.attempt > 1
        self.base: dict[str, Any] = {
            "gen_ai.conversation.id": wake.session_id,
            "fxworld.delivery": wake.attempt,
            "fxworld.takeover": self.takeover,
        }
        self.span: Any = None  # the open turn span
        self.prompt = 0  # the prompt its turn answers
        self.turn_attrs: dict[str, Any] = {}

    def taken(self, fence: Fence, state: Replay, last: Entry | None) -> None:
        self.base["fxworld.epoch"] = fence.epoch
        if self.m is None:
            return
        if self.takeover:
            self.m.takeovers.add(1)
        elif last is not None and _due_at_once(last):
            self.m.wake_lag.record(max(0.0, time.time() - last.at.timestamp()))

    def step(self, step: Step, state: Replay) -> None:
        cur = state.current
        prompt = step.prompt if isinstance(step, StartTurn) else cur.prompt if cur else 0
        if self.span is not None and prompt == self.prompt:
            return
        self._end_turn("continued elsewhere" if self.span is not None else None)
        self.prompt = prompt
        self.turn_attrs = {**self.base, "fxworld.prompt": prompt}
        if cur is not None and cur.prompt == prompt:
            self._named_turn(cur.turn)
        if self.tracer is not None:
            self._start_turn_span(state)

    def _named_turn(self, turn: str) -> None:
        self.turn_attrs["fxworld.turn"] = turn
        if self.span is not None:
            self.span.set_attribute("fxworld.turn", turn)

    def _start_turn_span(self, state: Replay) -> None:
        from opentelemetry import propagate

        cur = state.current
        first = cur.trace if cur is not None and cur.prompt == self.prompt else {}
        # the caller's span; without one, the span that started the turn (one trace)
        parent = propagate.extract(state.prompt_trace.get(self.prompt) or first)
        links = []
        if self.takeover and first:
            started = self.api.get_current_span(propagate.extract(first)).get_span_context()
            links = [self.api.Link(started, {"fxworld.link": "the span that started the turn"})]
        attrs = {**self.turn_attrs, "gen_ai.operation.name": "invoke_agent"}
        attrs["gen_ai.agent.name"] = self.agent
        if capture_content():
            attrs["fxworld.prompt.text"] = state.prompts.get(self.prompt, "")
        self.span = self.tracer.start_span(
            f"invoke_agent {self.agent}", parent, self.api.SpanKind.INTERNAL, attrs, links
        )
        if self.takeover:
            self.span.add_event("fxworld.takeover", {"fxworld.epoch": self.base["fxworld.epoch"]})

    def turn_trace(self) -> dict[str, Any]:
        if self.span is None:
            return {}
        from opentelemetry import propagate

        carrier: dict[str, str] = {}
        propagate.inject(carrier, self.api.set_span_in_context(self.span))
        return {TRACE_FIELD: carrier}

    def stepped(self, step: Step, state: Replay) -> None:
        cur = state.current
        if cur is not None and "fxworld.turn" not in self.turn_attrs and cur.prompt == self.prompt:
            self._named_turn(cur.turn)
        if self.m is not None:
            self.m.steps.add(1, {"fxworld.step": type(step).__name__})
        if cur is None and self.prompt in state.answered:
            if self.m is not None:
                self.m.turns.add(1, {"fxworld.turn.outcome": _outcome(state.last_end)})
            self._end_turn(None, _outcome(state.last_end))

    def _end_turn(self, why: str | None, outcome: str = "") -> None:
        span, self.span = self.span, None
        self.prompt = 0
        if span is None:
            return
        if why is not None:
            span.add_event("fxworld.run.ended", {"fxworld.reason": why})
        if outcome:
            span.set_attribute("fxworld.turn.outcome", outcome)
        if outcome == "failed":
            span.set_status(self.api.StatusCode.ERROR, "turn failed")
        span.end()

    def chat(self, model: Model) -> Call:
        name = str(getattr(model, "name", "") or "model")
        provider, _, rest = name.partition("/")
        requested = str(getattr(model, "model", "") or rest or name)
        attrs = {
            **self.turn_attrs,
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": requested,
        }
        return _Chat(self, f"chat {requested}", attrs)

    def tool(self, c: CallState, attempt: int) -> Call:
        attrs = {
            **self.turn_attrs,
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": c.name,
            "gen_ai.tool.call.id": c.id,
            "gen_ai.tool.type": "function",
            "fxworld.execution_id": c.execution_id,
            "fxworld.tool.attempt": attempt,
            "fxworld.rerun": attempt > 1,
        }
        if capture_content():
            attrs["gen_ai.tool.call.arguments"] = json.dumps(c.input)
        return _Tool(self, f"execute_tool {c.name}", attrs)

    def child(self, name: str, attrs: Mapping[str, Any]) -> Any:
        """A span under the open turn span (None without a tracer)."""
        if self.tracer is None:
            return None
        parent = self.api.set_span_in_context(self.span) if self.span is not None else None
        return self.tracer.start_span(name, parent, self.api.SpanKind.INTERNAL, attrs)

    def approvals(self, delta: int) -> None:
        if self.m is not None:
            self.m.approvals.add(delta)

    def end(self, outcome: str) -> None:
        self._end_turn(outcome)


class _Timed(Call):
    """A span under the turn span, and when it began."""

    def __init__(self, run: OtelRun, name: str, attrs: dict[str, Any]) -> None:
        self.run = run
        self.attrs = attrs
        self.span = run.child(name, attrs)
        self.began = time.monotonic()
        self.error: str | None = None

    def cut(self, why: str) -> None:
        self.error = why

    def attach(self) -> object:
        if self.span is None:
            return None
        from opentelemetry import context

        return context.attach(self.run.api.set_span_in_context(self.span))

    def detach(self, token: object) -> None:
        if token is not None:
            from opentelemetry import context

            context.detach(token)  # type: ignore[arg-type]

    def _close(self) -> float:
        seconds = time.monotonic() - self.began
        if self.span is not None:
            if self.error is not None:
                self.span.set_status(self.run.api.StatusCode.ERROR, self.error)
                self.span.set_attribute("error.type", self.error)
            self.span.end()
        return seconds


class _Chat(_Timed):
    def response(self, response: ModelResponse) -> None:
        usage = response.usage
        if self.span is not None:
            if usage is not None:
                self.span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
                self.span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
            if response.stop_reason:
                self.span.set_attribute("gen_ai.response.finish_reasons", [response.stop_reason])
        m = self.run.m
        if m is not None and usage is not None:
            base = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": self.attrs["gen_ai.request.model"],
            }
            m.tokens.record(usage.input_tokens, {**base, "gen_ai.token.type": "input"})
            m.tokens.record(usage.output_tokens, {**base, "gen_ai.token.type": "output"})

    def end(self) -> None:
        seconds = self._close()
        m = self.run.m
        if m is not None:
            attrs = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": self.attrs["gen_ai.request.model"],
            }
            if self.error is not None:
                attrs["error.type"] = self.error
            m.duration.record(seconds, attrs)


class _Tool(_Timed):
    def result(self, output: str, is_error: bool) -> None:
        if is_error:
            self.error = "tool_error"
        if self.span is not None and capture_content():
            self.span.set_attribute("gen_ai.tool.call.result", output)

    def end(self) -> None:
        seconds = self._close()
        m = self.run.m
        if m is not None:
            m.tool_duration.record(seconds, {"gen_ai.tool.name": self.attrs["gen_ai.tool.name"]})
