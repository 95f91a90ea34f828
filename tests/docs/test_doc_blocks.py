"""Every Python block of README.md and docs/*.md runs as written (tests/docs/blocks.py),
or is skipped by a ``skip`` directive that says why."""

from __future__ import annotations

import unittest
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.blocks import DOCUMENTS, SERVERS, DocRun, block_lines, skips_without_reason

BLOCKS = [
    pytest.param(doc, line, id=f"{doc}:{line}") for doc in DOCUMENTS for line in block_lines(doc)
]


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, DocRun]]:
    opened: dict[str, DocRun] = {}
    yield opened
    for run in opened.values():
        run.close()


@pytest.mark.parametrize(("doc", "line"), BLOCKS)
def test_doc_block_runs(
    doc: str,
    line: int,
    runs: dict[str, DocRun],
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = runs.get(doc)
    if run is None:
        server = SERVERS.get(doc)
        replacements = {}
        if server is not None:
            replacements = server.replacements(request.getfixturevalue(server.fixture))
        run = runs[doc] = DocRun(doc, tmp_path_factory.mktemp("doc"), replacements)
    monkeypatch.chdir(run.workdir)  # ./.fxworld/ of the embedded world: the document's own
    run.run_through(line)


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_every_skipped_block_says_why(doc: str) -> None:
    assert skips_without_reason(doc) == [], f'{doc}: write <!-- skip: next "the reason" -->'


def test_a_skip_directive_skips_its_block_with_its_reason_and_one_without_is_found(
    tmp_path: Path,
) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nx = 1\n```\n\n"
        '<!-- skip: next "needs a real API key" -->\n\n```python\nraise SystemExit\n```\n\n'
        "```python\nassert x == 1\n```\n\n<!-- skip: next -->\n"
    )
    lines = block_lines(str(page))
    run = DocRun(str(page), tmp_path, {})
    try:
        with pytest.raises(unittest.SkipTest, match="needs a real API key"):
            run.run_through(lines[1])
        run.run_through(lines[2])  # the blocks before and after it ran
    finally:
        run.close()
    assert skips_without_reason(str(page)) == [len(page.read_text().splitlines())]
