"""The whole kit against SqliteWorld, tier 2 included (several OS processes share
one file)."""

from pathlib import Path

import pytest

from fxworld_conformance import Target, WorldConformance


class TestSqliteWorld(WorldConformance):
    @pytest.fixture
    def fxworld_target(self, tmp_path: Path) -> Target:
        return Target(url=f"sqlite:///{tmp_path}/w.db")
