"""``encrypted+<URL>``: an EncryptedWorld over the world at ``<URL>``, with its keys
from ``FXWORLD_ENCRYPTION_KEYS`` (never from the URL). The fixture
:func:`encrypted_schemes` registers it with ``register_scheme`` so that the kit's
process tier opens EncryptedWorlds in its child processes too (they inherit the
registration and the environment)."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator

import pytest

from fxworld import EncryptedWorld, open_world, register_scheme, unregister_scheme
from fxworld.errors import ConfigurationError

__all__ = ["PREFIX", "from_url", "encrypted_schemes"]

PREFIX = "encrypted+"
INNER_SCHEMES = ("sqlite", "postgresql")


def from_url(url: str) -> EncryptedWorld:
    """The EncryptedWorld of ``encrypted+<inner URL>``."""
    if not url.startswith(PREFIX):
        raise ConfigurationError(f"not an {PREFIX}<URL> world URL")
    return EncryptedWorld.from_env(open_world(url.removeprefix(PREFIX)))


@pytest.fixture
def encrypted_schemes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``encrypted+sqlite`` and ``encrypted+postgresql``, with two fresh keys in the
    environment, for one test."""
    keys = ",".join(f"{name}:{base64.b64encode(os.urandom(32)).decode()}" for name in ("k2", "k1"))
    monkeypatch.setenv("FXWORLD_ENCRYPTION_KEYS", keys)
    for scheme in INNER_SCHEMES:
        register_scheme(PREFIX + scheme, f"{__name__}:from_url")
    yield
    for scheme in INNER_SCHEMES:
        unregister_scheme(PREFIX + scheme)
