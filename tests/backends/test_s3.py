"""S3World on a real S3 server (SeaweedFS ``weed mini``, or MinIO in Docker): every
guarantee W1-W17, then what is particular to S3 (the conditional-write check at
setup, request counts, compaction under races, wake intents of writers that died,
errors and credentials)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from fxworld import World
from fxworld_s3 import S3World
from tests.guarantees import GuaranteeTests
from tests.support.postgres_fixtures import fresh_namespace
from tests.support.s3_server import SECRET_KEY, S3Server

BUCKET = "fxworld-test"


def _world(server: S3Server, **kw: object) -> S3World:
    return S3World(BUCKET, endpoint_url=server.endpoint, namespace=fresh_namespace(), **kw)  # type: ignore[arg-type]


class TestS3World(GuaranteeTests):
    secrets = (SECRET_KEY,)

    @pytest.fixture
    async def world(self, s3_server: S3Server) -> AsyncIterator[World]:
        w = _world(s3_server)
        await w.setup()
        yield w
        await w.close()


@pytest.fixture
async def s3(s3_server: S3Server) -> AsyncIterator[S3World]:
    w = _world(s3_server)
    await w.setup()
    yield w
    await w.close()
