"""`fxworld setup --world URL`: create or migrate a world's storage.

Calls the world's ``setup()``: tables, schemas, buckets or scripts, whatever the
backend needs. Idempotent, and safe to run from several processes at once (a
deploy step and a worker starting together). Works for any world URL.
"""

from __future__ import annotations

import argparse
from typing import Any

from fxworld.cli import add_world_option, open_world_for, plain


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "setup",
        help="create or migrate a world's storage (idempotent)",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_world_option(parser)
    parser.set_defaults(func=_run)


async def _run(args: argparse.Namespace) -> int:
    world = open_world_for(args, "create")  # it may make a SQLite file and its directory
    try:
        await world.setup()
    finally:
        await world.close()
    print(f"fxworld setup: {world!r} is ready")
    return 0
