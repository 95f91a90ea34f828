"""Every Python block of README.md and docs/*.md runs as written (tests/docs/blocks.py),
or is skipped by a ``skip`` directive that says why."""

from __future__ import annotations

from collections.abc import Iterator

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
