"""The key-encryption keys of an :class:`~fxworld.encryption.EncryptedWorld`.

Keys come from the application (a mapping of key id to 32 bytes, or one 32-byte
key) or from an environment variable (:func:`keys_from_env`), never from a URL.
A :class:`Keyring` keeps them only inside AES-GCM objects: no repr, log line or
error message of fxworld ever shows key material, only key ids.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping

from fxworld.encryption.envelope import AESGCM
from fxworld.errors import ConfigurationError

__all__ = ["Keyring", "Keys", "keys_from_env", "ENV_VAR", "DEFAULT_KEY_ID", "KEY_BYTES"]

Keys = Mapping[str, bytes] | bytes
"""What ``EncryptedWorld(inner, keys)`` takes: key id -> 32 bytes (the first is the
one new entries use), or a single 32-byte key (its id is :data:`DEFAULT_KEY_ID`)."""

ENV_VAR = "FXWORLD_ENCRYPTION_KEYS"
"""The environment variable :func:`keys_from_env` reads by default."""

DEFAULT_KEY_ID = "default"
"""The key id of a single key given without one."""

KEY_BYTES = 32
"""AES-256: every key is exactly 32 bytes."""

_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,32}")


class Keyring:
    """Key ids and their AES-GCM objects; :attr:`current` seals new entries."""

    def __init__(self, keys: Keys) -> None:
        items = _items(keys)
        if not items:
            raise ConfigurationError("EncryptedWorld needs at least one key")
        self.ciphers: dict[str, AESGCM] = {}
        for n, (key_id, key) in enumerate(items, start=1):
            if not isinstance(key_id, str) or _KEY_ID.fullmatch(key_id) is None:
                # not quoted: a key id that fails is often the key itself (pair swapped)
                raise ConfigurationError(
                    f"key number {n}: its key id is not 1..32 characters of [A-Za-z0-9._-]"
                )
            if not isinstance(key, (bytes, bytearray)) or len(key) != KEY_BYTES:
                what = f"{len(key)} bytes" if isinstance(key, (bytes, bytearray)) else "not bytes"
                raise ConfigurationError(
                    f"key {key_id!r} must be {KEY_BYTES} bytes (AES-256), not {what}"
                )
            self.ciphers[key_id] = AESGCM(bytes(key))
        self.current = items[0][0]
        """The id of the key that wraps the data keys of new entries."""

    @property
    def ids(self) -> list[str]:
        """The key ids, the current one first."""
        return list(self.ciphers)

    def __repr__(self) -> str:
        return f"Keyring(key_ids={self.ids!r})"


def _items(keys: object) -> list[tuple[str, bytes]]:
    if isinstance(keys, (bytes, bytearray)):
        return [(DEFAULT_KEY_ID, bytes(keys))]
    if isinstance(keys, Mapping):
        return list(keys.items())
    raise ConfigurationError(
        f"keys must be a mapping of key id to {KEY_BYTES} bytes, or {KEY_BYTES} bytes, "
        f"not {type(keys).__name__}"
    )


def keys_from_env(name: str = ENV_VAR) -> dict[str, bytes]:
    """Read keys from the environment variable ``name``: ``id:BASE64,id:BASE64``
    (the first is the one new entries use), or one ``BASE64`` key (id
    :data:`DEFAULT_KEY_ID`). Each key is 32 bytes in standard base64 (``openssl rand
    -base64 32``). A missing, empty or malformed value is a ``ConfigurationError``
    that names the variable and the key's position, never any part of its value
    (not even a key id: written ``BASE64:id``, the pair swapped, the id is the key)."""
    text = os.environ.get(name, "").strip()
    if not text:
        raise ConfigurationError(f"environment variable {name} is not set (keys: id:BASE64,...)")
    keys: dict[str, bytes] = {}
    for n, part in enumerate(text.split(","), start=1):
        key_id, sep, encoded = part.strip().rpartition(":")
        if not sep:
            key_id = DEFAULT_KEY_ID
        why = _env_key_problem(key_id, encoded.strip(), keys)
        if why is not None:
            raise ConfigurationError(f"{name}: key number {n} {why} (write id:BASE64,...)")
        keys[key_id] = base64.b64decode(encoded.strip(), validate=True)
    return keys


def _env_key_problem(key_id: str, encoded: str, seen: Mapping[str, bytes]) -> str | None:
    """Why one ``id:BASE64`` pair of the variable is not a key, in words that quote
    neither part; ``None`` if it is one."""
    if _KEY_ID.fullmatch(key_id) is None:
        return "has a key id that is not 1..32 characters of [A-Za-z0-9._-]"
    if key_id in seen:
        return "repeats the id of an earlier key"
    try:
        size = len(base64.b64decode(encoded, validate=True))
    except (binascii.Error, ValueError):
        return "is not base64"
    if size != KEY_BYTES:
        return f"is {size} bytes; a key is {KEY_BYTES} bytes (AES-256)"
    return None
