"""Push: a message to a queue after every wake made durable, so that a serverless
deployment with no worker runs each turn (docs/serverless.md).

- :class:`Push`, the protocol (``async push(session_id, *, delay=0.0)``,
  ``async close()``); :class:`HTTPPush`, :class:`SQSPush`, :class:`VercelQueuePush`.
- :class:`PushingWorld`: any world, pushing after each ``append(wake=)`` and
  ``wake()``; :func:`with_push` wraps a world with a push or ``$FXWORLD_PUSH``.
- :func:`tick`: a message for each overdue wake (a scheduled job), bounded per tick.
- Messages name the session's agent; :class:`PerAgentPush` (or a push URL with
  ``{agent}``) gives each agent its own queue (W19, docs/serverless.md).
"""

from .agents import PerAgentPush
from .base import Push, PushStats, agent_of, message_body, session_of
from .choose import ENV_VAR, push_from_url, with_push
from .http import HTTPPush
from .sqs import SQS_MAX_DELAY, SQSPush
from .tick import OVERDUE, PER_TICK, tick
from .vercel import DEFAULT_TOPIC, VERCEL_MAX_DELAY, VercelQueuePush
from .world import DEFAULT_TIMEOUT, TIMEOUT_ENV_VAR, PushingWorld

__all__ = [
    "Push",
    "PushStats",
    "PushingWorld",
    "PerAgentPush",
    "HTTPPush",
    "SQSPush",
    "VercelQueuePush",
    "ENV_VAR",
    "SQS_MAX_DELAY",
    "VERCEL_MAX_DELAY",
    "DEFAULT_TOPIC",
    "DEFAULT_TIMEOUT",
    "TIMEOUT_ENV_VAR",
    "OVERDUE",
    "PER_TICK",
    "message_body",
    "session_of",
    "agent_of",
    "push_from_url",
    "with_push",
    "tick",
]
