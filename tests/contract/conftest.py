"""Black-box contract tests: only the public names docs/contract.md fixes.

``world_url`` gives a fresh, empty world URL on memory://, a SQLite file and a
real PostgreSQL server (tests/support starts a throwaway local cluster).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def world_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return _url(request, tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def shared_world_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Worlds with the capability ``shared``: two objects opened on one URL see each other."""
    return _url(request, tmp_path)


def _url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/world.db?namespace=c_{uuid.uuid4().hex[:8]}"
    url: str = request.getfixturevalue("pg_url")
    return url
