"""The ``Push`` protocol, the message every push sends, and the push counters."""

from __future__ import annotations

import json
import logging
import sys
import uuid
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from fxworld import validate

__all__ = ["Push", "PushStats", "message_body", "session_of", "agent_of", "count"]

logger = logging.getLogger("fxworld.push")


@runtime_checkable
class Push(Protocol):
    """A doorbell: tells a queue that session ``session_id`` has a wake due in
    ``delay`` seconds. The world stays the truth: a message that is lost delays a
    turn but never loses it (the tick sends it again), and a duplicate runs
    nothing twice (the wake's lease decides)."""

    async def push(self, session_id: str, *, delay: float = 0.0) -> None:
        """Send one message naming ``session_id``, to be delivered in ``delay``
        seconds or later (or sooner: the consumer takes only due wakes).

        A push may also take ``agent: str | None = None``, the name of the agent
        that owns the session (W19), and put it in the message (every push fxworld
        ships does): a :class:`~fxworld.push.PushingWorld` passes it to a push
        whose ``push`` accepts it."""
        ...

    async def close(self) -> None:
        """Release the client (idempotent)."""
        ...


def message_body(session_id: str, agent: str | None = None) -> bytes:
    """The body every push sends: ``{"session_id": ..., "id": ...}`` as JSON (what
    :func:`fxworld.web.wake_handler` and :func:`fxworld.aws.lambda_handler` read),
    with ``"agent"``, the session's owner, when it is known (W19: a consumer
    serving other agents leaves the message to that agent's runners).

    ``id`` is new for each message, so two messages for one session signed in the same
    second differ: the wake route refuses a signature it has seen as a replay, and
    without it a turn's second continuation in one second was taken for the first."""
    message = {"session_id": validate.session_id(session_id), "id": uuid.uuid4().hex}
    if agent is not None:
        message["agent"] = validate.agent_name(agent)
    return json.dumps(message).encode()


def session_of(body: str | bytes | dict[str, Any]) -> str | None:
    """The session a message names, or ``None`` (not JSON, no valid ``session_id``)."""
    sid = _parsed(body).get("session_id")
    try:
        return validate.session_id(sid) if isinstance(sid, str) else None
    except ValueError:
        return None


def agent_of(body: str | bytes | dict[str, Any]) -> str | None:
    """The agent a message names (the session's owner), or ``None`` (a message of
    an earlier version, or of a session with no owner recorded, or not valid)."""
    name = _parsed(body).get("agent")
    try:
        return validate.agent_name(name) if isinstance(name, str) else None
    except ValueError:
        return None


def _parsed(body: str | bytes | dict[str, Any]) -> dict[str, Any]:
    message: Any = body
    if isinstance(body, str | bytes):
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):
            return {}
    return message if isinstance(message, dict) else {}


@dataclass
class PushStats:
    """How many pushes one :class:`~fxworld.push.world.PushingWorld` sent, failed
    or left out (``coalesced``); in-process, for tests and benchmarks (OpenTelemetry gets the
    counters ``fxworld.push.sent`` and ``fxworld.push.failed`` too)."""

    sent: int = 0
    failed: int = 0
    coalesced: int = 0
    """Pushes not sent: the session's pending wake already had its message."""


_counters: dict[str, tuple[Any, Any]] = {}


def count(name: str, attributes: dict[str, str] | None = None) -> None:
    """Add 1 to the OpenTelemetry counter ``fxworld.push.<name>`` when the
    application set a meter provider (fxworld never imports OpenTelemetry first)."""
    metrics = sys.modules.get("opentelemetry.metrics")
    if metrics is None:
        return
    provider = metrics.get_meter_provider()
    if isinstance(provider, metrics.NoOpMeterProvider) or type(provider).__name__.startswith(
        "_Proxy"
    ):
        return
    held = _counters.get(name)
    if held is None or held[0] is not provider:
        meter = provider.get_meter("fxworld")
        held = _counters[name] = (
            provider,
            meter.create_counter(f"fxworld.push.{name}", "{message}", f"Pushes {name}"),
        )
    held[1].add(1, attributes or {})
