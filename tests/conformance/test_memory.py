"""The whole kit against MemoryWorld (the first target of the kit)."""

import pytest

from fxworld_conformance import Target, WorldConformance


class TestMemoryWorld(WorldConformance):
    @pytest.fixture
    def fxworld_target(self) -> Target:
        return Target(url="memory://")
