"""The wake handler: an ASGI endpoint that runs due turns when a signed request
arrives, for push-style queues, cron jobs and serverless functions.

A request is accepted only if it carries a valid HMAC-SHA256 signature of its
body and timestamp (see :mod:`fxworld.signing`) no older than five minutes;
anything else is answered 401 and runs nothing. An accepted request runs the
agent as a worker with ``until_idle=True`` and a time budget: the invocation's
time limit less a safety margin. A turn still running when the budget nears stops
at a step boundary, appends a wake, and continues at the next invocation (the
next queue delivery or cron tick), in this process or another.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from fxworld import signing, validate
from fxworld.errors import ConfigurationError, InvalidSessionId
from fxworld.push.base import agent_of

from . import _vercel
from ._maxduration import function_max_duration
from ._refusals import HTTPError, error_response
from ._requests import read_body

if TYPE_CHECKING:
    from fxworld.engine import Agent

__all__ = [
    "WakeHandler",
    "wake_handler",
    "SECRET_ENV",
    "MAX_BODY_BYTES",
    "MAX_RUNS",
    "TIME_LIMIT",
]

logger = logging.getLogger("fxworld.web")

SECRET_ENV = "FXWORLD_WAKE_SECRET"
"""The environment variable the handler reads its secret from when none is given."""

MAX_BODY_BYTES = 64 * 1024

TIME_LIMIT = 60.0
"""The seconds an invocation may run when neither ``time_limit=`` nor (on
Vercel) the function's ``maxDuration`` says."""

MAX_RUNS = 2
"""The most wake runs (each a worker of ``concurrency`` sessions) one handler runs
at once in this process; a request beyond them is answered 503 with
``Retry-After``."""

_MIN_SECRET_BYTES = 16


class WakeHandler:
    """An ASGI app answering ``POST`` with a signed body; see the module docstring.

    ``secret``: the shared HMAC key (str or bytes, at least 16 bytes), else the
    ``FXWORLD_WAKE_SECRET`` environment variable. ``time_limit``: the seconds an
    invocation may run (your platform's function time limit); when it is not
    given: on Vercel, the function's ``maxDuration`` in the ``vercel.json`` it was
    deployed with (:mod:`fxworld.web._maxduration`), else (or when that gives
    none) :data:`TIME_LIMIT`, 60 s. ``margin``: the seconds kept free before it,
    to hand the session back and answer. ``lease`` and ``concurrency`` are passed
    to ``agent.work()``.

    ``agent``: the agent whose turns it runs, or several (one route for all the
    agents of an app, on one shared queue). Each runs only its own sessions (W19).
    A message naming an agent this handler does not serve runs nothing and is
    answered 200 ``{"status": "other_agent"}``: its wake stays in the world for
    that agent's runners (on a shared Vercel topic, each agent's route has its
    own consumer group and its own copy; see docs/serverless.md). A message
    naming no agent (a cron tick, an earlier version's message) runs every agent
    served.

    ``vercel``: also take Vercel Queues push deliveries (``None``: when
    ``$VERCEL`` is set, as on Vercel), verified by the queue service (see
    :mod:`fxworld.web._vercel`); the secret is then optional (without one, every
    HMAC-signed request is refused).

    The body is the queue's message, signed as is: JSON, optionally naming the
    session (``{"session_id": ...}``). Wakes are taken from the world, so every due
    session runs (the named one among them), each at most once at a time across
    all invocations. The answer:

    - 401 for a missing, wrong or stale signature (nothing ran); 413, 405; 400 for
      a signed body that is not JSON or names an invalid ``session_id``.
    - A request's only power is "look for due turns now": the worker takes wakes
      from the world, so a replay (to any instance, or after a restart) re-runs
      no turn and repeats no effect; it runs only what is due anyway, once.
      Within this handler, a copy (the same signature) that arrives while the
      original runs, or after it was answered 200 within the replay window,
      starts nothing: it gets the original's answer. At most ``max_runs`` (2)
      runs at once per handler, signed requests and Vercel Queues deliveries
      together; beyond them, 503 ``busy`` with ``Retry-After`` (a delivery beyond
      them is verified, asked again in a second, and answered 200 ``busy``).
    - 200 ``{"status": "done"}``: the named session's last turn is over.
    - 200 ``{"status": "waiting"}``: its turn waits for a person's decision on a
      call (``needs_approval``): nothing runs until one comes, so the message is
      not delivered again. The decision's wake (or, for a call with an
      ``approval_timeout``, the wake due at its expiry) is run by a later
      invocation, e.g. a cron tick.
    - 200 ``{"status": "yielded"}``: its turn yielded at the deadline and the
      agent's push (``Agent(push=...)``, ``$FXWORLD_PUSH``) sent the message that
      continues it; this one is done (one message per continuation, see
      :mod:`fxworld.consume`).
    - The named session's status is how the run that took it ended
      (``WorkResult.ended``: nothing is read after it); a session the run did not
      take is looked at in the log (:mod:`fxworld.consume`): ``yielded`` when
      another worker's run yielded it meanwhile.
    - 503 ``{"status": "deadline" | "pending"}`` with ``Retry-After``: the named
      session still has work that nothing pushed (its turn yielded at the
      deadline with no push configured, or one failed; the deadline came before
      it ran; or a crashed worker's lease has not run out yet). Push queues
      deliver the message again, and the next invocation continues the turn.
    - 200 ``{"status": "idle" | "deadline"}`` for a body that names no session
      (a cron tick): what was due ran, until idle or the deadline.
    """

    def __init__(
        self,
        agent: Agent | Sequence[Agent],
        *,
        secret: str | bytes | None = None,
        time_limit: float | None = None,
        margin: float = 5.0,
        lease: float = 15.0,
        concurrency: int = 8,
        replay_window: float = signing.REPLAY_WINDOW,
        max_runs: int = MAX_RUNS,
        vercel: bool | None = None,
    ) -> None:
        if secret is None:
            secret = os.environ.get(SECRET_ENV) or None
        self.vercel = bool(os.environ.get("VERCEL")) if vercel is None else vercel
        if secret is None and not self.vercel:
            raise ConfigurationError(
                f"the wake handler needs a secret: pass secret=... or set ${SECRET_ENV}"
            )
        key = (
            None
            if secret is None
            else secret.encode()
            if isinstance(secret, str)
            else bytes(secret)
        )
        if key is not None and len(key) < _MIN_SECRET_BYTES:
            raise ConfigurationError(
                f"the wake handler's secret must be at least {_MIN_SECRET_BYTES} bytes"
            )
        if time_limit is None:
            time_limit = (function_max_duration() if self.vercel else None) or TIME_LIMIT
        if not time_limit > margin >= 0:
            raise ConfigurationError(
                f"time_limit ({time_limit:g} s) must be greater than margin ({margin:g} s), "
                "margin >= 0"
            )
        if not (isinstance(max_runs, int) and max_runs >= 1):
            raise ConfigurationError("max_runs must be a positive integer")
        from fxworld.consume import served

        self.agents = served(agent)  # by name (W19)
        self.agent = next(iter(self.agents.values()))
        self._key = key
        self.max_runs = max_runs
        self._runs: dict[str, asyncio.Task[JSONResponse]] = {}  # by signature
        self._delivering = 0  # Vercel Queues deliveries running
        self._answered: dict[str, tuple[float, JSONResponse]] = {}  # signature: (until, 200)
        self.time_limit = float(time_limit)
        self.margin = float(margin)
        self.lease = lease
        self.concurrency = concurrency
        self.replay_window = replay_window

    def __repr__(self) -> str:  # never the secret
        names = ", ".join(self.agents)
        return f"WakeHandler(agents=[{names}], time_limit={self.time_limit})"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # mounted as a whole app: nothing to set up
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        started = time.monotonic()
        request = Request(scope, receive)
        try:
            response = await self._handle(request, started)
        except HTTPError as e:  # a malformed Content-Length
            response = error_response(e.status, e.code, e.message, e.headers)
        except Exception:
            logger.exception("wake handler failed")
            response = error_response(500, "internal", "internal server error")
        await response(scope, receive, send)

    async def _handle(self, request: Request, started: float) -> JSONResponse:
        if request.method != "POST":
            return error_response(405, "method_not_allowed", "POST a signed wake request")
        body = await read_body(request, MAX_BODY_BYTES)
        if body is None:
            return error_response(413, "too_large", f"the body is over {MAX_BODY_BYTES} bytes")
        if self.vercel and _vercel.is_delivery(request.headers):
            return await _vercel.handle_delivery(
                body, request.headers, started, lease=self.lease, run=self._delivery_run
            )
        if self._key is None or not signing.verify(
            self._key, body, request.headers, window=self.replay_window
        ):
            return error_response(401, "unauthorized", "missing, invalid or expired signature")
        try:
            session_id = _named_session(body)
        except ValueError as e:
            return error_response(400, "invalid_request", str(e))
        # A copy of a request that is running (a replay, a queue's duplicate
        # delivery) starts no second worker: it gets the running one's answer; so
        # does a copy of one answered 200 within the replay window. (A 503 is not
        # kept: it asks for the same request again, which must run.)
        signature = request.headers.get(signing.SIGNATURE_HEADER, "").strip()
        now = time.monotonic()
        for sig, (until, _) in list(self._answered.items()):
            if until <= now:
                del self._answered[sig]
        if signature in self._answered:
            return self._answered[signature][1]
        run = self._runs.get(signature)
        if run is None:
            if self._busy():
                return self._busy_response()
            run = asyncio.ensure_future(self._run(session_id, started, agent_of(body)))
            self._runs[signature] = run
            run.add_done_callback(lambda _: self._runs.pop(signature, None))
        response = await asyncio.shield(run)
        if response.status_code == 200:
            self._answered[signature] = (now + 2 * self.replay_window, response)
        return response

    def _busy(self) -> bool:
        """Whether ``max_runs`` runs (signed requests' and deliveries') are under way."""
        return len(self._runs) + self._delivering >= self.max_runs

    def _busy_response(self) -> JSONResponse:
        return error_response(
            503,
            "busy",
            f"{self.max_runs} wake runs are under way in this process; retry",
            {"Retry-After": "1"},
        )

    async def _delivery_run(
        self, session_id: str | None, started: float, agent: str | None = None
    ) -> JSONResponse:
        """A verified Vercel Queues delivery's run, within ``max_runs``: beyond them,
        503 ``busy`` (the delivery is then asked again in a second)."""
        if self._busy():
            return self._busy_response()
        self._delivering += 1
        try:
            return await self._run(session_id, started, agent)
        finally:
            self._delivering -= 1

    async def _run(
        self, session_id: str | None, started: float, agent: str | None = None
    ) -> JSONResponse:
        from fxworld.consume import Handoffs, work_all
        from fxworld.engine import WorkResult

        if agent is not None and agent not in self.agents:
            # W19: another agent's session: run nothing; its wake stays in the world
            return JSONResponse({"status": "other_agent", "agent": agent})
        agents = [self.agents[agent]] if agent is not None else list(self.agents.values())
        budget = self.time_limit - self.margin - (time.monotonic() - started)
        ran = 0.0
        worked = WorkResult(hit_deadline=True)  # no time left: nothing runs
        handoffs = await Handoffs.before(agents[0], [session_id] if session_id else [])
        if budget > 0:
            logger.info("wake request (session %s): working for up to %.1fs", session_id, budget)
            began = time.monotonic()
            worked = await work_all(
                agents,
                deadline=budget,
                until_idle=True,
                lease=self.lease,
                concurrency=self.concurrency,
            )
            ran = time.monotonic() - began
        hit_deadline = worked.hit_deadline or ran >= budget - 0.01
        # "deadline": a turn stopped for the time limit (or the budget ran out), and
        # goes on at the next invocation.
        status = "deadline" if hit_deadline else "idle"
        if session_id is None:  # a cron tick: whatever was due ran
            return JSONResponse({"status": status, "ran": round(ran, 3)})
        end = await handoffs.ended(worked, session_id)  # as the run said, if it ran it
        if end != "pending":  # over, waiting, or its yield's own message continues it
            return JSONResponse({"status": end, "ran": round(ran, 3)})
        # The named session still has work that nothing pushed (the deadline came
        # before it ran, or a crashed worker's lease has not run out yet): a
        # retryable status, so that a push queue delivers the message again.
        retry_after = 1 if status == "deadline" else max(1, round(self.lease))
        return JSONResponse(
            {"status": "pending" if status == "idle" else status, "ran": round(ran, 3)},
            status_code=503,
            headers={"Retry-After": str(retry_after)},
        )


def wake_handler(
    agent: Agent | Sequence[Agent],
    secret: str | bytes | None = None,
    *,
    time_limit: float | None = None,
    margin: float = 5.0,
    lease: float = 15.0,
    vercel: bool | None = None,
) -> WakeHandler:
    """An ASGI endpoint that runs ``agent``'s due turns on a signed request (push
    queues, cron, serverless functions); see :class:`WakeHandler`. ``secret``
    defaults to ``$FXWORLD_WAKE_SECRET``; an unsigned or stale request gets 401
    and runs nothing. ``time_limit`` defaults, on Vercel, to the function's
    ``maxDuration``; an explicit one wins."""
    return WakeHandler(
        agent, secret=secret, time_limit=time_limit, margin=margin, lease=lease, vercel=vercel
    )


def _named_session(body: bytes) -> str | None:
    """The session the body names; ``None`` for a cron tick (an empty body, or
    JSON naming no session). ``ValueError`` for a body that is not JSON (or too
    deeply nested to read) or names an invalid session id."""
    if not body.strip():
        return None
    try:
        message: Any = json.loads(body)
    except (ValueError, RecursionError):
        raise ValueError("the body is not JSON") from None
    if not isinstance(message, dict) or message.get("session_id") is None:
        return None
    try:
        return validate.session_id(message["session_id"])
    except InvalidSessionId:
        raise ValueError("the body's session_id is not a valid session id") from None
