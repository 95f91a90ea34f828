"""RedisWorld on a real Redis server: every guarantee W1-W17, then what is
particular to Redis (one command per call, NOSCRIPT reload, durability detection,
partitions, Cluster slots, delete, credentials)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from fxworld import World
from fxworld_redis import RedisWorld
from tests.guarantees import GuaranteeTests
from tests.support.redis_fixtures import fresh_namespace
from tests.support.redis_server import PASSWORD, RedisServer


class TestRedisWorld(GuaranteeTests):
    secrets = (PASSWORD,)

    @pytest.fixture
    async def world(self, redis_server: RedisServer) -> AsyncIterator[World]:
        w = RedisWorld(redis_server.url, namespace=fresh_namespace())
        await w.setup()
        yield w
        await w.close()
