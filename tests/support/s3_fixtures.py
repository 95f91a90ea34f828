"""pytest fixtures for a real S3 server (registered from tests/conftest.py).

``s3_server``: one server for the whole test session (see
:mod:`tests.support.s3_server`); if it cannot start, every test that needs it
fails with the reason: never skipped.
``s3_url``: the ``s3://`` URL of a fresh, empty namespace on it, already set up,
for tests whose worker processes open the world by URL.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.namespaces import fresh_namespace, set_up
from tests.support.s3_server import S3Server, start_s3

__all__ = ["s3_server", "s3_url"]


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    server = start_s3()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_url(s3_server: S3Server) -> str:
    """A fresh, set-up namespace on the test server, as an ``s3://`` URL."""
    return set_up(s3_server.url(namespace=fresh_namespace("e")))
