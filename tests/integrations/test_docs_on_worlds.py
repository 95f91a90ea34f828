"""The blocks of docs/integrations.md run on every shared world named by
``FXWORLD_URL``, as the page says (tests/docs runs them on SQLite)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.blocks import DocRun

DOC = "docs/integrations.md"


@pytest.mark.parametrize("name", ["postgresql", "pgbouncer", "redis", "redis-cluster", "s3"])
def test_the_integrations_page_runs_on_a_world_named_by_fxworld_url(
    name: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.integrations.conftest import world_url_for

    monkeypatch.setenv("FXWORLD_URL", world_url_for(name, request, tmp_path))
    monkeypatch.chdir(tmp_path)
    run = DocRun(DOC, tmp_path, {})
    try:
        run.run_through(run.examples[-1].line)
    finally:
        run.close()
    assert not (tmp_path / ".fxworld").exists()  # the embedded world was not used
