"""`fxworld export | import | copy`: move sessions between worlds.

``export --world URL [--session ID ...] [--out FILE]`` writes the sessions as JSON
Lines (a header with the format version, then one line per entry) to FILE, or to
stdout. ``import --world URL [--resume] FILE`` reads such a file into a world (FILE
may be a pipe: ``-`` or ``/dev/stdin``). ``copy --from URL --to URL [--session ID
...] [--verify]`` streams sessions from one world into another; ``--verify`` then
compares each session's entry count and hash.

Without ``--session``, every session of the world (for worlds that can list them).
A copied session keeps its positions, so clients' cursors stay valid; a worker on
the target takes over with a greater epoch; pending wakes come along.

Both are all or nothing: before writing anything they check every session against
the target, and a bad file, an entry over the target's max_entry_bytes, or a
session whose log in the target is not the start of the source's (it diverged)
stops the command with nothing written. Import only creates sessions: a file with
a session the target already has is refused. Rerunning an interrupted copy
finishes it with no duplicate, and brings sessions that changed in the source up
to date; an interrupted import is finished with ``import --resume`` and the same
FILE. A progress bar shows sessions and entries per second when stdout is a
terminal (``--progress``: always; ``--quiet``: never).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from fxworld.cli import Access, plain, world_url

__all__ = ["register"]


def register(sub: Any) -> None:
    epilog = plain(__doc__)
    export = sub.add_parser(
        "export", help="write sessions to a JSON Lines file", description=epilog
    )
    export.add_argument("--world", metavar="URL", default=None, help="the world to read")
    _sessions_option(export)
    export.add_argument("--out", metavar="FILE", default=None, help="the file (default: stdout)")
    _progress_options(export)
    export.set_defaults(func=_export)

    imp = sub.add_parser("import", help="read sessions from an export file", description=epilog)
    imp.add_argument("--world", metavar="URL", default=None, help="the world to write")
    imp.add_argument("file", metavar="FILE", help="a file written by fxworld export (- for stdin)")
    imp.add_argument(
        "--resume",
        action="store_true",
        help="finish an import of this same FILE that was interrupted. It is recognised by "
        "the marker session fximport.<SHA-256 of FILE> that an import writes before its "
        "first session and deletes after its last; each of FILE's sessions the target has "
        "must then be the start of FILE's, compared entry by entry",
    )
    _progress_options(imp)
    imp.set_defaults(func=_import)

    copy = sub.add_parser(
        "copy", help="copy sessions from one world to another", description=epilog
    )
    copy.add_argument("--from", dest="source", metavar="URL", required=True, help="source world")
    copy.add_argument("--to", dest="target", metavar="URL", required=True, help="target world")
    _sessions_option(copy)
    copy.add_argument(
        "--verify", action="store_true", help="then compare entry counts and a hash per session"
    )
    _progress_options(copy)
    copy.set_defaults(func=_copy)


def _sessions_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--session",
        dest="sessions",
        metavar="ID",
        action="append",
        default=None,
        help="a session to move (repeatable; default: every session the world lists)",
    )


def _progress_options(parser: argparse.ArgumentParser) -> None:
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--quiet", action="store_true", help="no progress bar")
    shown.add_argument("--progress", action="store_true", help="a progress bar even if not a TTY")


class _Bar:
    """Two tqdm bars on stderr: sessions done (of the total) and entries per second."""

    def __init__(self, args: argparse.Namespace, sessions: int | None) -> None:
        self.shown = args.progress or (not args.quiet and sys.stdout.isatty())
        if not self.shown:
            return
        from tqdm import tqdm

        self.sessions = tqdm(total=sessions, unit=" sessions", position=0, file=sys.stderr)
        self.count = tqdm(unit=" entries", position=1, file=sys.stderr)

    def entries(self, n: int) -> None:
        if self.shown:
            self.count.update(n)

    def session_done(self) -> None:
        if self.shown:
            self.sessions.update(1)

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, t: type[BaseException] | None, e: object, tb: TracebackType | None) -> None:
        if self.shown:
            self.count.close()
            self.sessions.close()


def _url(value: str | None) -> str:
    """``value``, else ``$FXWORLD_URL``, else the embedded world (as ``--world``)."""
    return world_url(argparse.Namespace(world=value))


def _open(url: str, access: Access) -> Any:
    """A world for ``url``: a SQLite one read-only for ``read``, maybe new for ``create``."""
    from fxworld import open_world
    from fxworld.cli import url_for

    return open_world(url_for(argparse.Namespace(world=url), access))


async def _export(args: argparse.Namespace) -> int:
    from fxworld.moving import export_sessions, session_ids
    from fxworld.urls import mask

    url = _url(args.world)
    world = _open(url, "read")
    try:
        ids = await session_ids(world, args.sessions, mask(url))
        out = Path(args.out) if args.out else None
        with _Bar(args, len(ids)) as bar:
            if out is None:
                total = await export_sessions(world, ids, sys.stdout, bar)
            else:
                total = await _export_to(world, ids, out, bar)
    finally:
        await world.close()
    where = f" to {args.out}" if args.out else ""
    print(f"exported {len(ids)} sessions, {total} entries{where}", file=sys.stderr)
    return 0


async def _export_to(world: Any, ids: list[str], out: Path, bar: _Bar) -> int:
    """Export into a temporary file beside ``out``, renamed to it once whole: an
    interrupted export leaves no file that looks finished."""
    from fxworld.errors import InvalidArgument
    from fxworld.moving import export_sessions

    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    except OSError as e:
        raise InvalidArgument(f"{out}: cannot write it ({e.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            total = await export_sessions(world, ids, f, bar)
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise
    return total


async def _import(args: argparse.Namespace) -> int:
    from fxworld.moving import check_file, entry_limit, import_file, spooled

    with spooled(args.file) as path:  # a pipe is read once, into a temporary file
        # --resume finishes an import into a world that exists: it creates none
        world = _open(_url(args.world), "write" if args.resume else "create")
        try:
            # the whole file, against the target's own limits, before any I/O: a bad
            # file creates nothing, not even an empty world
            summary = check_file(path, max_entry_bytes=entry_limit(world))
            await world.setup()
            with _Bar(args, len(summary.sessions)) as bar:
                done = await import_file(world, path, bar, resume=args.resume, checked=summary)
        finally:
            await world.close()
    written = sum(d.written for d in done)
    print(
        f"imported {len(done)} sessions: {written} entries written, "
        f"{summary.entries - written} already there",
        file=sys.stderr,
    )
    return 0


async def _copy(args: argparse.Namespace) -> int:
    from fxworld.moving import session_ids
    from fxworld.urls import mask

    source = _open(args.source, "read")
    target = None
    try:
        ids = await session_ids(source, args.sessions, mask(args.source))
        for sid in ids[:1]:  # a source that cannot be read fails before the target is made
            await source.read(sid, 0, limit=1)
        target = _open(args.target, "create")
        await target.setup()
        return await _copy_all(args, source, target, ids)
    finally:
        await source.close()
        if target is not None:
            await target.close()


async def _copy_all(args: argparse.Namespace, source: Any, target: Any, ids: list[str]) -> int:
    from fxworld.moving import copy_sessions, verify

    with _Bar(args, len(ids)) as bar:
        done = await copy_sessions(source, target, ids, bar)  # all or nothing
    written = sum(d.written for d in done)
    print(f"copied {len(done)} of {len(ids)} sessions, {written} entries written", file=sys.stderr)
    if not args.verify:
        return 0
    differ = await verify(source, target, ids)
    for line in differ:
        print(f"fxworld copy: verify: {line}", file=sys.stderr)
    if not differ:
        print(f"verified: {len(ids)} sessions match", file=sys.stderr)
    return 1 if differ else 0
