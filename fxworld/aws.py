"""AWS Lambda with SQS: :func:`lambda_handler` (docs/serverless.md, "Deploy on AWS Lambda").

An SQS event source mapping invokes the handler with a batch of messages, each
naming a session (``{"session_id": ...}``, what :class:`~fxworld.push.SQSPush`
sends). The handler runs the agent as a worker until nothing is due or the
invocation's time nears its end (``context.get_remaining_time_in_millis()`` less
``margin``: by default a fifth of it, at most 3 s): a turn still running then
yields at a step boundary with a wake, and
continues in the next invocation: the yield's own push (``SQSPush``) sends the
message that continues it, at once. It answers with a partial batch response
(``ReportBatchItemFailures``): the messages whose session still has work that no
push handed on (a crashed run's lease has not run out; a push failed) are
delivered again after the queue's visibility timeout (set it to the lease); the
others are deleted, so a turn costs one message per invocation it needs
(:mod:`fxworld.consume`). How a session ended is what the run that took it says
(``WorkResult.ended``): nothing is read after it. A function that crashes answers
nothing, so the whole batch comes back after the visibility timeout, by which
time the dead run's lease has run out, and the turn continues from the log (the
tool that was running is not run again unless idempotent; the model is told).

A Lambda function is invoked only by its event source mapping, so the handler
checks no signature. A message that names no valid session is dropped.

Agents (W19): the handler runs one agent, or several (one function for all the
agents of an app on one shared queue); each takes only its own sessions' wakes.
A message naming an agent the function does not serve runs nothing and is
reported as a batch item failure, so that the queue delivers it again, to another
function that reads the queue; give each agent its own queue (a push URL with
``{agent}``) to spare that round (docs/serverless.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fxworld.consume import Handoffs, served, work_all
from fxworld.engine import WorkResult
from fxworld.push.base import agent_of, session_of

if TYPE_CHECKING:
    from fxworld.engine import Agent

__all__ = ["lambda_handler", "LambdaHandler", "default_margin", "MARGIN", "MIN_BUDGET"]

logger = logging.getLogger("fxworld.aws")

LambdaHandler = Callable[[Mapping[str, Any], Any], dict[str, Any]]
"""``handler(event, context) -> {"batchItemFailures": [...]}``."""


MARGIN = 3.0
"""The most seconds the handler keeps free by default before the time limit."""
MARGIN_SHARE = 0.2
"""The share of the invocation's time kept free by default, when under :data:`MARGIN`."""
MIN_BUDGET = 0.5
"""The fewest seconds a run is given: with less, nothing runs and a warning says so."""


def default_margin(remaining: float) -> float:
    """The margin kept free when none is given: a fifth of the time left, at most
    :data:`MARGIN` (3 s): 0.6 s of Lambda's default 3 s timeout, 3 s of 15 s or more."""
    return min(MARGIN, MARGIN_SHARE * max(0.0, remaining))


def lambda_handler(
    agent: Agent | Sequence[Agent],
    *,
    margin: float | None = None,
    lease: float = 15.0,
    concurrency: int = 8,
) -> LambdaHandler:
    """A Lambda handler for an SQS event source mapping that runs ``agent``'s due
    turns; see the module. ``margin``: seconds kept free before the time limit to
    hand a turn back and answer (``None``: :func:`default_margin`, a fifth of the
    time left, at most 3 s). An invocation left less than :data:`MIN_BUDGET` to
    run once the margin is kept runs nothing and logs a warning that says to raise
    the function's timeout. ``lease`` and ``concurrency`` go to
    ``agent.work()``; set the queue's visibility timeout to ``lease``.

    One event loop is kept for the life of the execution environment, so the
    world's connections are reused by warm invocations."""
    loop = asyncio.new_event_loop()
    agents = served(agent)

    def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        remaining = float(context.get_remaining_time_in_millis()) / 1000.0
        kept = default_margin(remaining) if margin is None else margin
        budget = remaining - kept
        if budget < MIN_BUDGET and event.get("Records"):
            logger.warning(
                "lambda_handler: %.1f s left in this invocation, %.1f s of it kept free "
                "(margin): too short to run a turn, so nothing runs and the messages "
                "come back after the visibility timeout; raise the function's Timeout "
                "(to %.0f s or more)%s",
                remaining,
                kept,
                max(10.0, kept + 10.0),
                "" if margin is None else ", or lower margin=",
            )
        return loop.run_until_complete(
            _invoke(agents, event, budget, lease=lease, concurrency=concurrency)
        )

    return handler


async def _invoke(
    agents: dict[str, Agent],
    event: Mapping[str, Any],
    budget: float,
    *,
    lease: float,
    concurrency: int,
) -> dict[str, Any]:
    named: dict[str, tuple[str, str | None]] = {}  # message id: (session id, agent)
    failures = []
    for record in event.get("Records") or []:
        body = str(record.get("body", ""))
        sid, owner = session_of(body), agent_of(body)
        if sid is None:
            logger.warning("message %s names no valid session: dropped", record.get("messageId"))
            continue
        if owner is not None and owner not in agents:  # W19: another agent's: not run here
            failures.append({"itemIdentifier": str(record["messageId"])})
            continue
        named[str(record["messageId"])] = (sid, owner)
    if not named and failures:
        return {"batchItemFailures": failures}  # nothing of ours: run nothing
    owners = {owner for _, owner in named.values()}
    if None in owners or not owners:
        running = list(agents.values())  # a message naming no agent: every agent runs
    else:
        running = [agents[o] for o in sorted(o for o in owners if o is not None)]
    handoffs = {
        a.name: await Handoffs.before(a, [s for s, o in named.values() if o in (a.name, None)])
        for a in running
    }
    worked = WorkResult(hit_deadline=True)  # no time left: nothing runs
    if budget >= MIN_BUDGET:
        worked = await work_all(
            running, deadline=budget, until_idle=True, lease=lease, concurrency=concurrency
        )
    for message_id, (sid, owner) in named.items():
        ends = handoffs[owner or running[0].name]
        if await ends.ended(worked, sid) != "pending":
            continue  # over, waiting, or a new message continues it: deleted
        failures.append({"itemIdentifier": message_id})  # work left: deliver it again
    return {"batchItemFailures": failures}
