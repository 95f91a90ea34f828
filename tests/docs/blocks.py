"""The Python blocks of README.md and docs/*.md, parsed by Sybil and run in order.

Each document runs in one namespace (a block sees what the blocks above it
defined), in a temporary working directory of its own, with one event loop: a
block may ``await`` at the top level, as the docs' fragments do. Sybil's markdown
directives work as in any Sybil setup:

* ``<!-- invisible-code-block: python ... -->`` is a block the reader does not
  see (stand-ins, checks of what a block did);
* ``<!-- skip: next "why" -->`` skips the next block, for example one that needs a
  real API key; the reason is required and shows in the test report.

A document that needs a server names a pytest fixture and the strings to replace
with that server's address (:data:`SERVERS`), so its blocks read like a real
deployment and run against the suite's own throwaway servers. Each item of the
namespace ``monkeypatch`` (a :class:`pytest.MonkeyPatch`) is undone when the
document is done.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import unittest
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sybil import Document, Example
from sybil.parsers.markdown import CodeBlockParser, SkipParser

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = ["README.md", *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Server:
    """A document's server: the fixture that starts it, and what to put in its blocks."""

    fixture: str
    replacements: Callable[[Any], dict[str, str]]


SERVERS: dict[str, Server] = {
    "docs/postgres.md": Server("postgres_server", lambda s: {"postgresql://app:pw@db/app": s.url}),
    "docs/redis.md": Server("redis_server", lambda s: {"redis://:pw@cache:6379/0": s.url}),
    "docs/s3.md": Server(
        "s3_server",
        lambda s: {'S3World("my-bucket", ': f'S3World("my-bucket", endpoint_url="{s.endpoint}", '},
    ),
}


def _parse(path: Path, evaluator: Callable[[Example], None] | None = None) -> Document:
    python = CodeBlockParser(language="python", evaluator=evaluator or _not_run)
    return Document.parse(str(path), python, SkipParser())


def _not_run(example: Example) -> None:
    raise AssertionError("parsed for its line numbers only")


def block_lines(doc: str) -> list[int]:
    """The first line of each Python block (visible or not) of ``doc``, in order."""
    return [e.line for e in _parse(REPO / doc).examples() if _is_python(e)]


def python_blocks(doc: str) -> list[tuple[int, str]]:
    """The first line and the source of each Python block (visible or not) of
    ``doc``, in order."""
    return [(e.line, str(e.parsed)) for e in _parse(REPO / doc).examples() if _is_python(e)]


def skips_without_reason(doc: str) -> list[int]:
    """Lines of ``skip:`` directives in ``doc`` that give no reason."""
    out = []
    for e in _parse(REPO / doc).examples():
        if not _is_python(e) and e.parsed[0] in ("next", "start") and not e.parsed[1]:
            out.append(e.line)
    return out


def _is_python(example: Example) -> bool:
    return isinstance(example.parsed, str)


@dataclass
class DocRun:
    """One document's examples, run in order, each at most once."""

    doc: str
    workdir: Path
    replacements: dict[str, str]
    monkeypatch: pytest.MonkeyPatch = field(default_factory=pytest.MonkeyPatch)
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    done: int = 0
    failed_at: int | None = None

    def __post_init__(self) -> None:
        text = (REPO / self.doc).read_text()
        for old in self.replacements:
            assert old in text, f"{self.doc} no longer holds {old!r}: update tests/docs/blocks.py"
        document = _parse(REPO / self.doc, self._evaluate)
        document.namespace["monkeypatch"] = self.monkeypatch
        self.examples = list(document.examples())
        # the process's world is the document's own while it runs (restored after)
        self.monkeypatch.setattr("fxworld.selection._current", None)
        self.monkeypatch.setattr("fxworld.selection._current_from", None)

    def run_through(self, line: int) -> None:
        """Run every example up to the Python block at ``line``, that one last."""
        if self.failed_at is not None:
            pytest.skip(f"{self.doc}: the block at line {self.failed_at} failed")
        upto = next(i for i, e in enumerate(self.examples) if e.line == line and _is_python(e))
        while self.done <= upto:
            example = self.examples[self.done]
            self.done += 1
            try:
                example.evaluate()
            except unittest.SkipTest:  # a skip directive's reason: this block's, or not shown
                if self.done > upto:
                    raise
            except Exception:
                self.failed_at = example.line
                raise

    def _evaluate(self, example: Example) -> None:
        __tracebackhide__ = True
        source = str(example.parsed)
        for old, new in self.replacements.items():
            source = source.replace(old, new)
        padded = "\n" * (example.line + example.parsed.line_offset) + source
        code = compile(
            padded, example.path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
        )
        if code.co_flags & inspect.CO_COROUTINE:  # the block awaits at the top level
            self.loop.run_until_complete(eval(code, example.namespace))
        else:
            exec(code, example.namespace)

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()
            self.monkeypatch.undo()
