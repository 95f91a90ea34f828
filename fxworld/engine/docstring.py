"""A tool's docstring, read the way Google's style writes it.

:func:`read_docstring` splits a docstring into the tool's description (the
docstring without its ``Args:`` section) and a description per parameter (from
that section). The section starts at a line ``Args:`` or ``Arguments:`` at the
docstring's left margin; each entry is ``name: text`` or ``name (type): text``,
indented; a line indented deeper than its entry continues the entry's text (a
blank line between two such lines starts a new paragraph). The section ends at
the next line at the left margin (``Returns:``, prose, ...), which the
description keeps. A line of the section that is neither an entry nor a
continuation raises :class:`~fxworld.errors.InvalidArgument`, so a description
is never dropped without a word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fxworld.errors import InvalidArgument

__all__ = ["Docstring", "read_docstring"]

_SECTION = re.compile(r"(?:Args|Arguments):\s*")
_ENTRY = re.compile(r"\*{0,2}(?P<name>[A-Za-z_]\w*)\s*(?:\([^)]*\))?\s*:(?:\s+(?P<text>.*))?")


@dataclass(frozen=True)
class Docstring:
    """What a docstring says of a tool: ``description`` (without the ``Args:``
    section) and ``params`` (parameter name -> its description)."""

    description: str
    params: dict[str, str] = field(default_factory=dict)


def read_docstring(doc: str) -> Docstring:
    """Split ``doc`` (cleaned, as :func:`inspect.getdoc` returns it); see the module."""
    lines = doc.splitlines()
    kept: list[str] = []
    params: dict[str, str] = {}
    i = 0
    while i < len(lines):
        if _SECTION.fullmatch(lines[i]):
            i = _read_section(lines, i + 1, params)
        else:
            kept.append(lines[i])
            i += 1
    return Docstring(re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip(), params)


def _read_section(lines: list[str], i: int, params: dict[str, str]) -> int:
    """Read the entries from line ``i`` into ``params``; the index of the first line
    after the section (its trailing blank lines are the section's)."""
    entry_indent: int | None = None
    name: str | None = None
    paragraphs: list[list[str]] = []  # of the current entry's text
    while i < len(lines):
        line = lines[i]
        text = line.strip()
        indent = len(line) - len(line.lstrip())
        if not text:
            if paragraphs and paragraphs[-1]:
                paragraphs.append([])
        elif indent == 0:
            break
        elif entry_indent is None or indent <= entry_indent:
            entry = _ENTRY.fullmatch(text)
            if entry is None:
                raise InvalidArgument(
                    f"cannot read {text!r} in the docstring's Args section: write each "
                    "parameter as 'name: description' (or 'name (type): description')"
                )
            _keep(params, name, paragraphs)
            entry_indent, name = indent, entry["name"]
            paragraphs = [[entry["text"]] if entry["text"] else []]
        else:  # deeper than its entry: the entry's text goes on
            paragraphs[-1].append(text)
        i += 1
    _keep(params, name, paragraphs)
    return i


def _keep(params: dict[str, str], name: str | None, paragraphs: list[list[str]]) -> None:
    if name is not None:
        params[name] = "\n\n".join(" ".join(p) for p in paragraphs if p)
