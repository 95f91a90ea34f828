"""The ``fxworld`` command: ``demo | worker | conformance | bench | sessions | setup | serve |
inspect``, and ``export | import | copy`` (one module, :mod:`fxworld.commands.moving`).

Each command lives in its own module under :mod:`fxworld.commands` and exposes
``register(subparsers)``; the module is imported when the parser is built, so it
must import its heavy dependencies inside its handler, not at the top.

The command never guesses: an error is one line on stderr and a non-zero exit
(2 for a bad world, argument or missing extra, 1 for "nothing there", such as a
session that does not exist), never a traceback; a command that only reads opens
a SQLite world read-only and never creates its file (:func:`open_world_for`).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, NoReturn

from fxworld.errors import WorldError

if TYPE_CHECKING:
    from fxworld.protocol import World

__all__ = [
    "main",
    "build_parser",
    "add_world_option",
    "world_url",
    "url_for",
    "open_world_for",
    "plain",
    "EXTRAS",
]

_COMMANDS = (
    "demo",
    "worker",
    "sessions",
    "setup",
    "conformance",
    "bench",
    "serve",
    "inspect",
    "moving",
    "tick",
    "langgraph",
)

EXTRAS: dict[str, str] = {
    "asyncpg": "postgres",
    "sqlalchemy": "postgres",
    "redis": "redis",
    "hiredis": "redis",
    "aiobotocore": "s3",
    "botocore": "s3",
    "aiohttp": "s3",
    "hypothesis": "conformance",
    "pytest": "conformance",
    "_pytest": "conformance",
    "openai": "openai",
    "anthropic": "anthropic",
    "starlette": "web",
    "uvicorn": "web",
}
"""The extra that brings each optional module (a missing one is a one-line error
naming its ``pip install``)."""

Access = Literal["read", "write", "create"]
_ROLE = re.compile(r":[a-z]+:`(~?)([^`]+)`")  # :mod:`x`, :func:`~a.b`
_LITERAL = re.compile(r"``([^`]+)``|`([^`]+)`")
_SQLITE_MODES: dict[str, str] = {"read": "ro", "write": "rw"}


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line (``fxworld worker: --lease: must be
    ...``) and exit status 2, as every other bad input gets; ``--help`` has the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="fxworld", description="Durable AI-agent sessions on the storage you choose."
    )
    parser.add_argument("--version", action="version", version=f"fxworld {_installed_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMANDS:
        importlib.import_module(f"fxworld.commands.{name}").register(sub)
    return parser


def at_least_one(text: str) -> int:
    """An argparse type: a whole number of at least 1 (else a one-line usage error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def seconds(text: str) -> float:
    """An argparse type: a number of seconds greater than 0 (else a one-line usage error)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, not {text}")
    return value


def _installed_version() -> str:
    """The installed distribution's version (``importlib.metadata``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fxworld")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def add_world_option(parser: argparse.ArgumentParser) -> None:
    """The ``--world URL`` option every command that opens a world takes."""
    parser.add_argument(
        "--world",
        metavar="URL",
        default=None,
        help="world URL (default: $FXWORLD_URL, else the nearest .fxworld/world.db "
        "here or in a parent directory)",
    )


def world_url(args: argparse.Namespace, *, creating: bool = False) -> str:
    """The world URL a command was given: ``--world``, else ``$FXWORLD_URL``, else
    the project's embedded SQLite world (:func:`fxworld.selection.default_url`: the
    nearest ``.fxworld/`` here or above, by its absolute path)."""
    from fxworld.selection import ENV_VAR, default_url

    given = getattr(args, "world", None) or os.environ.get(ENV_VAR)
    return str(given or default_url(creating=creating))


def url_for(args: argparse.Namespace, access: Access) -> str:
    """The world URL of :func:`world_url`, to be opened for ``access``.

    ``"read"`` (commands that only look) opens a SQLite world read-only
    (``mode=ro``) and ``"write"`` (commands that change an existing world) opens
    only a file that exists (``mode=rw``): either way a missing file is a one-line
    error and nothing is created. ``"create"`` (``setup``, ``worker``, ``serve``,
    ``import``, ``copy --to``) may create it. A ``mode`` given in the URL is kept;
    other schemes are opened as they are.
    """
    from fxworld.urls import split_query, with_query

    url = world_url(args, creating=access == "create")
    mode = _SQLITE_MODES.get(access)
    sqlite = url.partition("://")[0].lower() == "sqlite"
    if mode is not None and sqlite and "mode" not in split_query(url)[1]:
        url = with_query(url, "mode", mode)
    return url


def open_world_for(args: argparse.Namespace, access: Access) -> World:
    """``open_world(url_for(args, access))``; one that writes pushes after each
    wake when ``$FXWORLD_PUSH`` is set (an approval, a Stop: :mod:`fxworld.push`)."""
    from fxworld import open_world
    from fxworld.push.choose import with_push

    opened = open_world(url_for(args, access))
    return opened if access == "read" else with_push(opened)


def plain(text: str | None) -> str:
    """A docstring as plain help text: reStructuredText roles and literals
    (``:mod:`x```, double backticks) become their bare text."""
    text = _ROLE.sub(lambda m: m[2].split(".")[-1] if m[1] else m[2], text or "")
    return _LITERAL.sub(lambda m: m[1] or m[2], text)


def _missing_extra(error: ModuleNotFoundError) -> str | None:
    """One line naming the ``pip install`` that brings the missing module, or
    ``None`` if no extra of fxworld brings it."""
    module = (error.name or "").split(".")[0]
    extra = EXTRAS.get(module)
    if extra is None:
        return None
    return f"this needs {module}, from the {extra!r} extra: pip install 'fxworld[{extra}]'"


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
    except ModuleNotFoundError as e:
        line = _missing_extra(e)
        if line is None:
            raise
        print(f"fxworld {args.command}: {line}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
