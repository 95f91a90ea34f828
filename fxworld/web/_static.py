"""Static files for ``fxworld serve --static DIR``: never a dotfile, never the world.

A directory served at ``/`` is public. Two mistakes make it leak: serving one that
holds hidden files (``.env``, ``.git/``, the default world's ``.fxworld/``), and
serving the directory that holds the world's database (its ``-wal`` file has
every session in it). So a path with any part starting with ``.`` is a 404, and
a directory that holds a SQLite world's files, or is the working directory of a
SQLite world, is refused at start.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any

from starlette.staticfiles import StaticFiles

from fxworld.embedded.sqlite import SqliteWorld
from fxworld.errors import ConfigurationError
from fxworld.protocol import World

__all__ = ["NoDotFiles", "static_files"]


class NoDotFiles(StaticFiles):
    """Starlette's ``StaticFiles``, answering 404 for any path with a part that
    starts with ``.`` (a dotfile or anything in a dot-directory)."""

    def lookup_path(self, path: str) -> tuple[str, Any]:
        if any(part.startswith(".") for part in Path(path).parts):
            return "", None
        return super().lookup_path(path)


def static_files(directory: str | PathLike[str], world: World) -> NoDotFiles:
    """The app serving ``directory`` (``index.html`` for a directory), or a
    :class:`ConfigurationError` if it is not a directory or would serve
    ``world``'s files."""
    root = Path(directory)
    if not root.is_dir():
        raise ConfigurationError(f"--static {str(directory)!r} is not a directory")
    root = root.resolve()
    if isinstance(world, SqliteWorld):
        database = Path(world.path).resolve()
        if root == Path.cwd().resolve() or root in database.parents:
            raise ConfigurationError(
                f"refusing --static {str(directory)!r}: it holds the world's database "
                f"({world.path}) or is the working directory of a SQLite world; "
                "serve a directory that holds only the page (e.g. examples/chat/static)"
            )
    return NoDotFiles(directory=root, html=True)
