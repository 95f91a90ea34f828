"""The ``fxworld`` command: ``demo | worker | conformance | bench | sessions | setup | serve``.

Each command lives in its own module under :mod:`fxworld.commands` and exposes
``register(subparsers)``; the module is imported when the parser is built, so it
must import its heavy dependencies inside its handler, not at the top.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import os
import sys
from collections.abc import Sequence

from fxworld.errors import WorldError

__all__ = ["main", "build_parser"]

_COMMANDS = ("demo", "worker", "sessions", "setup", "conformance", "bench", "serve")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fxworld", description="Durable AI-agent sessions on the storage you choose."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMANDS:
        importlib.import_module(f"fxworld.commands.{name}").register(sub)
    return parser


def add_world_option(parser: argparse.ArgumentParser) -> None:
    """The ``--world URL`` option every command that opens a world takes."""
    parser.add_argument(
        "--world",
        metavar="URL",
        default=None,
        help="world URL (default: $FXWORLD_URL, else sqlite:///.fxworld/world.db)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = args.func(args)
        if inspect.isawaitable(result):
            result = asyncio.run(result)  # type: ignore[arg-type]
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Whoever read our output went away (`fxworld sessions show ID | head`): not
        # an error worth a traceback. Point stdout at devnull so the interpreter's
        # final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except WorldError as e:
        print(f"fxworld: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
