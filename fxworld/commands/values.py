"""Large values on the command line: ``fxworld sessions show`` prints a large
value (over 4 KiB: :mod:`fxworld.bigvalues`) as its size and its first 4 KiB, with
a line under the entry naming the command that prints it whole::

           6  2026-12-08 00:44:52.609  tool.finished   1  {"output":"[3.0 MiB (3,145,728 bytes); ...
              /output: a large value, 3.0 MiB; the whole: fxworld sessions value s-big 6 /output

``fxworld sessions value ID SEQ [POINTER]`` writes one value of entry SEQ whole to
stdout (a string as it is, anything else as JSON; POINTER, a JSON pointer such as
``/output``, defaults to the whole data), in pieces of about 1 MiB: redirect it
to a file. A missing entry or value is one line and exit 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from fxworld.bigvalues import HEAD_BYTES, large_values, measure, pieces, resolve, size_text
from fxworld.cli import add_world_option, open_world_for, world_url

__all__ = ["register_value", "shorten"]


def _replaced(data: Any, parts: list[str], new: Any) -> Any:
    """A copy of ``data`` with the value at ``parts`` (decoded pointer parts) replaced."""
    if not parts:
        return new
    head, rest = parts[0], parts[1:]
    if isinstance(data, Mapping):
        return {k: (_replaced(v, rest, new) if k == head else v) for k, v in data.items()}
    if isinstance(data, list):
        return [_replaced(v, rest, new) if str(i) == head else v for i, v in enumerate(data)]
    return data


def _parts(at: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in at.split("/")[1:]]


def shorten(session_id: str, seq: int, data: Any) -> tuple[Any, list[str]]:
    """``data`` with each large value replaced by its size and first 4 KiB, and a
    line for each naming the command that prints it whole (none: ``data`` itself)."""
    notes = []
    for at, value in list(large_values(data)):
        size, head = measure(value)
        words = size_text(size)
        first = size_text(HEAD_BYTES)
        short = f"[{words} ({size:,} bytes); its first {first}:] {head[:HEAD_BYTES]}…"
        data = _replaced(data, _parts(at), short)
        notes.append(
            f"{'':>8}{at or '(the data)'}: a large value, {words};"
            f" the whole: fxworld sessions value {session_id} {seq} {at}".rstrip()
        )
    return data, notes


def register_value(actions: Any) -> None:
    """``fxworld sessions value ID SEQ [POINTER]``."""
    value = actions.add_parser("value", help="print one value of an entry whole (to a file)")
    value.add_argument("session_id", metavar="ID", help="the session id")
    value.add_argument("seq", type=int, metavar="SEQ", help="the entry's seq")
    value.add_argument(
        "pointer", nargs="?", default="", metavar="POINTER", help="a JSON pointer: /output"
    )
    add_world_option(value)
    value.set_defaults(func=_value)


async def _value(args: argparse.Namespace) -> int:
    from fxworld import validate as check
    from fxworld.urls import mask

    sid = check.session_id(args.session_id)
    check.read_args(max(0, args.seq - 1), 1)
    world = open_world_for(args, "read")
    try:
        found = await world.read(sid, args.seq - 1, limit=1) if args.seq > 0 else []
        if not found or found[0].seq != args.seq:
            where = f"no entry {args.seq} in {sid!r} in {mask(world_url(args))}"
            print(f"fxworld sessions value: {where}", file=sys.stderr)
            return 1
        try:
            value = resolve(found[0].data, args.pointer)
        except (LookupError, ValueError) as e:
            print(f"fxworld sessions value: entry {args.seq}: {e}", file=sys.stderr)
            return 1
        out = sys.stdout.buffer
        for piece in pieces(value):
            out.write(piece)
        out.flush()
        return 0
    finally:
        await world.close()
