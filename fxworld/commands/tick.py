"""`fxworld tick`: push a message for each overdue wake (a scheduled job's command).

Reads the push from ``--push`` or ``$FXWORLD_PUSH`` and the world from ``--world``
or ``$FXWORLD_URL``; sends one message per wake due for more than ``--overdue``
seconds and held by nobody, at most ``--limit``; prints how many. It runs no turn.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from fxworld.cli import add_world_option, open_world_for, plain


def register(sub: Any) -> None:
    from fxworld.push.tick import OVERDUE, PER_TICK

    parser: argparse.ArgumentParser = sub.add_parser(
        "tick",
        help="push a message for each overdue wake (for a scheduled job)",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_world_option(parser)
    parser.add_argument("--push", default=None, metavar="URL", help="the push ($FXWORLD_PUSH)")
    parser.add_argument(
        "--overdue", type=float, default=OVERDUE, metavar="S", help=f"due for S s ({OVERDUE:g})"
    )
    parser.add_argument(
        "--limit", type=int, default=PER_TICK, metavar="N", help=f"at most N ({PER_TICK})"
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from fxworld.errors import ConfigurationError
    from fxworld.push import ENV_VAR, push_from_url, tick

    url = args.push or os.environ.get(ENV_VAR)
    if not url:
        raise ConfigurationError(f"fxworld tick needs --push URL or ${ENV_VAR}")
    world = open_world_for(args, "read")
    push = push_from_url(url)

    async def go() -> int:
        try:
            return await tick(world, push, overdue=args.overdue, limit=args.limit)
        finally:
            await push.close()
            await world.close()

    try:
        sent = asyncio.run(go())
    except (OSError, ConnectionError, TimeoutError) as e:  # the queue is unreachable
        print(f"fxworld tick: the push failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"tick: {sent} message{'s' if sent != 1 else ''} sent")
    return 0
