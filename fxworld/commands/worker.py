"""`fxworld worker module:agent`: run an agent's turns in this process.

Takes wakes from the world and runs the sessions' turns until stopped. SIGTERM or
Ctrl-C stops it at the next step boundary and hands running sessions back at
once, so another worker continues them without waiting for a lease to run out;
then it closes the world. Once the world is set up it prints one line on stderr:
the world (credentials masked), its namespace, the agent it serves (it runs only
that agent's sessions, and those no agent owns yet), how many of them wait (a
pending wake; counted up to 1,000), the concurrency and the lease.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from datetime import UTC, datetime
from typing import Any

from fxworld.cli import add_world_option, at_least_one, plain, seconds


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "worker",
        help="run an agent's turns: take wakes, run sessions",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "agent", metavar="module:agent", help="where the Agent is: app:agent or path/app.py:agent"
    )
    add_world_option(parser)
    parser.add_argument(
        "--concurrency",
        type=at_least_one,
        default=8,
        metavar="N",
        help="sessions run at once (8)",
    )
    parser.add_argument(
        "--lease", type=seconds, default=15.0, metavar="S", help="wake lease in seconds (15)"
    )
    parser.add_argument(
        "--deadline",
        type=seconds,
        default=None,
        metavar="S",
        help="stop after S seconds, yielding running turns at a step boundary",
    )
    parser.add_argument(
        "--until-idle", action="store_true", help="return once no wake is due and nothing runs"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log each session run")
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="json: one JSON object per line, with the session id and turn (text)",
    )
    parser.set_defaults(func=_run)


async def _run(args: argparse.Namespace) -> int:
    from fxworld.commands.serve import agent_from_args, describe_world

    agent = agent_from_args(args)  # module:agent or path/file.py:agent
    if args.log_format == "json":
        logging.getLogger().handlers[0].setFormatter(JsonLines())
    world = await agent.ready()  # a bad world fails here, in one line
    stopped = _stop_on_signals(agent)  # from the ready line on, SIGTERM is graceful
    try:
        waiting = await _waiting(world, agent.name)
        ready = (
            f"fxworld worker: ready: {describe_world(world)}, agent {agent.name!r} "
            f"({waiting} of its sessions waiting), "
            f"concurrency {args.concurrency}, lease {args.lease:g} s"
        )
        if args.log_format == "json":  # every line a JSON object
            ready = json.dumps({"level": "INFO", "logger": "fxworld.worker", "message": ready})
        print(ready, file=sys.stderr, flush=True)
        if not stopped.is_set():
            await agent.work(
                concurrency=args.concurrency,
                lease=args.lease,
                deadline=args.deadline,
                until_idle=args.until_idle,
                handle_signals=True,  # the worker's own handlers replace ours
            )
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                asyncio.get_running_loop().remove_signal_handler(sig)
        await world.close()  # no client is left for the interpreter to find unclosed
    return 0


_COUNT_UP_TO = 1000


async def _waiting(world: Any, agent: str) -> str:
    """How many sessions of ``agent`` (or of no agent) have a pending wake: up to
    :data:`_COUNT_UP_TO` pending wakes are looked at (``"1000+"`` past them), each
    one's owner read from the world (W19) or, without the seam, from its log;
    ``"?"`` for a world that cannot list its wakes."""
    from fxworld.protocol import AgentRouter, WakeLister
    from fxworld.wakes import owner_in_log

    inner = getattr(world, "inner", world)
    if not isinstance(inner, WakeLister):
        return "?"
    seen, mine, after = 0, 0, ""
    while seen < _COUNT_UP_TO:
        page = await inner.list_wakes(after=after, limit=100)
        if not page:
            return str(mine)
        if isinstance(inner, AgentRouter):
            owners = await asyncio.gather(*(inner.owner(w.session_id) for w in page))
        else:
            owners = await asyncio.gather(*(owner_in_log(world, w.session_id) for w in page))
        mine += sum(1 for o in owners if o in (None, agent))
        seen += len(page)
        after = page[-1].session_id
    return f"{mine}+"


class JsonLines(logging.Formatter):
    """One JSON object per record: time, level, logger, pid, message, the
    session id and turn (extras of the ``fxworld.worker`` logger), and any
    exception's traceback."""

    def __init__(self) -> None:
        super().__init__()
        from fxworld.engine.log_fields import FIELDS

        self.fields = FIELDS

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        for name in self.fields:
            value = getattr(record, name, "")
            if value:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line)


def _stop_on_signals(agent: Any) -> asyncio.Event:
    """SIGTERM or SIGINT before the worker installs its handlers: set the event
    (the worker is not started) and stop whatever already runs."""
    stopped = asyncio.Event()

    def on_signal() -> None:
        stopped.set()
        agent.stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            asyncio.get_running_loop().add_signal_handler(sig, on_signal)
    return stopped
