"""MemoryWorld keeps every guarantee W1-W17 (the reference implementation)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from fxworld import MemoryWorld, World, open_world
from tests.guarantees import GuaranteeTests


class TestMemoryWorld(GuaranteeTests):
    @pytest.fixture
    async def world(self) -> AsyncIterator[World]:
        w = MemoryWorld()
        await w.setup()
        yield w
        await w.close()


def test_memory_url_and_capabilities() -> None:
    w = open_world("memory://?namespace=tenant_a")
    assert isinstance(w, MemoryWorld)
    assert w.namespace == "tenant_a"
    assert "durable" not in w.capabilities and "shared" not in w.capabilities
