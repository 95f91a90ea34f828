"""`fxworld tick`: push a message for each overdue wake (a scheduled job's command).

Reads the push from ``--push`` or ``$FXWORLD_PUSH`` and the world from ``--world``
or ``$FXWORLD_URL``; sends one message per wake due for more than ``--overdue``
seconds and held by nobody, at most ``--limit``; prints how many. It runs no turn.
A queue that is down or refuses the message: one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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


class _PushFailed(Exception):
    """The queue refused or could not be reached (any error of the push's client)."""


class _Reporting:
    """``push``, with any failure of its client (``OSError``, botocore's
    ``EndpointConnectionError``, a ``QueueError``, an HTTP error) raised as
    :class:`_PushFailed`; fxworld's own errors pass unchanged."""

    def __init__(self, push: Any) -> None:
        self.push_ = push

    async def push(self, session_id: str, *, delay: float = 0.0) -> None:
        from fxworld.errors import WorldError

        try:
            await self.push_.push(session_id, delay=delay)
        except (WorldError, asyncio.CancelledError):
            raise
        except Exception as e:
            raise _PushFailed(f"{type(e).__name__}: {e}") from e

    async def close(self) -> None:
        await self.push_.close()


def _run(args: argparse.Namespace) -> int:
    from fxworld.errors import ConfigurationError
    from fxworld.push import ENV_VAR, push_from_url, tick
    from fxworld.urls import mask_urls

    url = args.push or os.environ.get(ENV_VAR)
    if not url:
        raise ConfigurationError(f"fxworld tick needs --push URL or ${ENV_VAR}")
    world = open_world_for(args, "read")
    push = _Reporting(push_from_url(url))

    async def go() -> int:
        try:
            return await tick(world, push, overdue=args.overdue, limit=args.limit)
        finally:
            with contextlib.suppress(Exception):  # a client that never connected
                await push.close()
            await world.close()

    try:
        sent = asyncio.run(go())
    except _PushFailed as e:  # the queue is unreachable, or refused the message
        line = " ".join(mask_urls(str(e)).split())  # one line, credentials masked
        print(f"fxworld tick: the push failed: {line}", file=sys.stderr)
        return 2
    print(f"tick: {sent} message{'s' if sent != 1 else ''} sent")
    return 0
