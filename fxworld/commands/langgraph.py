"""`fxworld langgraph-copy`: move LangGraph threads into a world.

``langgraph-copy --from URL [--world URL] [--thread ID ...]`` reads the threads of
the saver at ``--from`` (a ``postgresql://`` URL: LangGraph's PostgreSQL saver's
database, its tables in the connection's schema; a ``redis://`` URL:
langgraph-checkpoint-redis) and copies them into a WorldSaver on the world
(``--world``, else ``$FXWORLD_URL``, else the project's embedded world), with
:func:`fxworld.integrations.langgraph.copy_threads`: every checkpoint, its writes
and pending interrupts, so each copied thread resumes on the world. Without
``--thread``, every thread. Run again, it copies nothing twice and brings over what
the source wrote since. The source's driver comes with ``langgraph-checkpoint-postgres``
or ``langgraph-checkpoint-redis``.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fxworld.cli import add_world_option, open_world_for, plain

__all__ = ["register"]

_SCHEMES = {
    "postgresql": "postgres",
    "postgres": "postgres",
    "redis": "redis",
    "rediss": "redis",
}


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "langgraph-copy",
        help="copy LangGraph threads from a PostgreSQL or Redis saver into a world",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--from", dest="source", required=True, metavar="URL", help="the saver's database"
    )
    add_world_option(parser)
    parser.add_argument(
        "--thread",
        dest="threads",
        action="append",
        default=None,
        metavar="ID",
        help="a thread to copy (repeat for several; default: every thread)",
    )
    parser.set_defaults(func=_run)


async def _run(args: argparse.Namespace) -> int:
    from fxworld.errors import ConfigurationError
    from fxworld.integrations.langgraph import WorldSaver, copy_threads
    from fxworld.scrub import scrub

    kind = _SCHEMES.get(str(args.source).partition("://")[0].lower())
    if kind is None:
        raise ConfigurationError(
            f"langgraph-copy --from {scrub(args.source)}: use a postgresql:// URL "
            "(LangGraph's PostgreSQL saver) or a redis:// URL (langgraph-checkpoint-redis)"
        )
    world = open_world_for(args, "create")
    try:
        await world.setup()
        async with _saver(kind, args.source) as source:
            copied = await copy_threads(source, WorldSaver(world), thread_ids=args.threads)
    finally:
        await world.close()
    print(f"langgraph-copy: {copied} checkpoint{'s' if copied != 1 else ''} copied")
    return 0


@asynccontextmanager
async def _saver(kind: str, url: str) -> AsyncIterator[Any]:
    """The incumbent saver at ``url``; a missing driver is a one-line error."""
    from fxworld.errors import ConfigurationError

    module = f"langgraph.checkpoint.{kind}.aio"
    try:
        drivers = importlib.import_module(module)
    except ModuleNotFoundError:
        raise ConfigurationError(f"--from: pip install langgraph-checkpoint-{kind}") from None
    saver_class = drivers.AsyncPostgresSaver if kind == "postgres" else drivers.AsyncRedisSaver
    async with saver_class.from_conn_string(url) as saver:
        if kind == "redis":
            await saver.asetup()  # its search indexes, which its reads need
        yield saver
