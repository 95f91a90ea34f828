"""Every world the integrations run on, as a fresh, set-up namespace URL.

``encrypted+<URL>`` worlds are EncryptedWorlds over the world at ``<URL>``, their keys
in ``FXWORLD_ENCRYPTION_KEYS`` (set here for the whole test, so that child
processes open the same EncryptedWorld); :func:`open_test_world` opens any of them.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from fxworld import EncryptedWorld, World, open_world
from tests.support.namespaces import fresh_namespace, set_up

WORLDS = (
    "memory",
    "sqlite",
    "postgresql",
    "pgbouncer",
    "redis",
    "redis-cluster",
    "s3",
    "encrypted+sqlite",
    "encrypted+postgresql",
    "encrypted+redis",
    "encrypted+s3",
)
"""Every world the integrations are proven on."""

SHARED = tuple(w for w in WORLDS if w != "memory")
"""The worlds several OS processes can open at once."""

ENCRYPTED = "encrypted+"


def open_test_world(url: str) -> World:
    """The world of a URL from :func:`world_url` (``encrypted+`` included)."""
    if url.startswith(ENCRYPTED):
        return EncryptedWorld.from_env(open_world(url.removeprefix(ENCRYPTED)))
    return open_world(url)


def _plain_url(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    ns = fresh_namespace("lg")
    if name == "memory":
        return "memory://"
    if name == "sqlite":
        return f"sqlite:///{tmp_path}/world.db"
    if name == "postgresql":
        return set_up(f"{request.getfixturevalue('postgres_server').url}?namespace={ns}")
    if name == "pgbouncer":
        return str(request.getfixturevalue("pgbouncer_url"))
    if name == "redis":
        return set_up(f"{request.getfixturevalue('redis_server').url}?namespace={ns}")
    if name == "redis-cluster":
        return set_up(f"{request.getfixturevalue('redis_cluster').url}&namespace={ns}")
    if name == "s3":
        return set_up(request.getfixturevalue("s3_server").url(namespace=ns))
    raise ValueError(name)


def world_url_for(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if not name.startswith(ENCRYPTED):
        return _plain_url(name, request, tmp_path)
    mp: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    mp.setenv("FXWORLD_ENCRYPTION_KEYS", f"k1:{base64.b64encode(os.urandom(32)).decode()}")
    return ENCRYPTED + _plain_url(name.removeprefix(ENCRYPTED), request, tmp_path)


@pytest.fixture(params=WORLDS)
def world_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh world of each kind, by URL."""
    yield world_url_for(request.param, request, tmp_path)


@pytest.fixture(params=SHARED)
def shared_world_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh world of each kind that several processes can open, by URL."""
    yield world_url_for(request.param, request, tmp_path)
