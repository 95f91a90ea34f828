"""`fxworld worker module:agent`: run an agent's turns in this process.

Takes wakes from the world and runs the sessions' turns until stopped. SIGTERM or
Ctrl-C stops it at the next step boundary and hands running sessions back at
once, so another worker continues them without waiting for a lease to run out.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import Any

from fxworld.cli import add_world_option
from fxworld.errors import ConfigurationError


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "worker",
        help="run an agent's turns: take wakes, run sessions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("agent", metavar="module:agent", help="where the Agent is, e.g. app:agent")
    add_world_option(parser)
    parser.add_argument(
        "--concurrency", type=int, default=8, metavar="N", help="sessions run at once (8)"
    )
    parser.add_argument(
        "--lease", type=float, default=15.0, metavar="S", help="wake lease in seconds (15)"
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=None,
        metavar="S",
        help="stop after S seconds, yielding running turns at a step boundary",
    )
    parser.add_argument(
        "--until-idle", action="store_true", help="return once no wake is due and nothing runs"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log each session run")
    parser.set_defaults(func=_run)


def load_agent(target: str) -> Any:
    """The object ``module:attribute`` names (the current directory is importable)."""
    from fxworld.engine import Agent

    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"expected module:agent, e.g. app:agent, not {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigurationError(f"cannot import {module_name!r}: {e}") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigurationError(f"{module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if callable(obj) and not isinstance(obj, Agent):
        obj = obj()
    if not isinstance(obj, Agent):
        raise ConfigurationError(f"{target} is a {type(obj).__name__}, not an fxworld Agent")
    return obj


async def _run(args: argparse.Namespace) -> int:
    import fxworld

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s[%(process)d] %(message)s",
    )
    if args.world:
        fxworld.world(args.world)
    agent = load_agent(args.agent)
    await agent.work(
        concurrency=args.concurrency,
        lease=args.lease,
        deadline=args.deadline,
        until_idle=args.until_idle,
        handle_signals=True,
    )
    return 0
