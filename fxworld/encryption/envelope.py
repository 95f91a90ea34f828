"""The sealed form of an entry and of a session's data key (docs/encryption.md).

An entry's data is stored as the JSON object :func:`seal` makes: the version, the
id of the key-encryption key, the id of the session's data key, whether its seq is
bound, a 96-bit random nonce and the AES-256-GCM ciphertext with its tag. The
associated data (:func:`entry_ad`) binds the namespace, the session id, the kind,
the epoch, the key ids and the seq (``"s": 1``; ``0`` only in entries an earlier
version appended without ``expect=``): an entry moved anywhere else fails its tag.

This is the only module of fxworld that imports ``cryptography``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

from fxworld.errors import ConfigurationError
from fxworld.validate import SEALED_FIELD

try:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
except ImportError:  # pragma: no cover - the extra is part of dev
    raise ConfigurationError(
        "EncryptedWorld needs the cryptography package: pip install 'fxworld[encryption]'"
    ) from None

__all__ = [
    "AESGCM",
    "InvalidTag",
    "VERSION",
    "Sealed",
    "seal",
    "unseal",
    "parse",
    "entry_ad",
    "data_key_ad",
    "max_plaintext",
    "to_data",
    "b64",
    "unb64",
    "DATA_KEY_ID_CHARS",
    "new_data_key_id",
    "data_key_id_fits",
]

VERSION = 1
"""The format version, first in every sealed entry (``"fxenc": 1``)."""

NONCE_BYTES = 12
TAG_BYTES = 16
DATA_KEY_ID_CHARS = 16
"""A data key id is 16 hex characters: 4 random bytes, then 4 bytes of a hash of
them with the namespace and session id (:func:`new_data_key_id`)."""


@dataclass(frozen=True)
class Sealed:
    """The fields of a sealed entry's data."""

    key_id: str
    """The key-encryption key that wraps the data key."""
    data_key_id: str
    """The session's data key the entry is sealed with."""
    seq_bound: bool
    """Whether the associated data holds the entry's seq."""
    nonce: bytes
    ciphertext: bytes
    """The ciphertext followed by the 16-byte GCM tag."""


def seal(cipher: AESGCM, plaintext: bytes, ad: bytes) -> tuple[bytes, bytes]:
    """Encrypt under a fresh random nonce; return ``(nonce, ciphertext + tag)``."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce, cipher.encrypt(nonce, plaintext, ad)


def unseal(cipher: AESGCM, nonce: bytes, ciphertext: bytes, ad: bytes) -> bytes | None:
    """The plaintext, or ``None`` if the tag does not match (altered or moved)."""
    if len(nonce) != NONCE_BYTES:
        return None
    try:
        return cipher.decrypt(nonce, ciphertext, ad)
    except InvalidTag:
        return None


def to_data(sealed: Sealed) -> dict[str, Any]:
    """The JSON object stored as the entry's data."""
    return {
        SEALED_FIELD: VERSION,
        "k": sealed.key_id,
        "d": sealed.data_key_id,
        "s": int(sealed.seq_bound),
        "n": b64(sealed.nonce),
        "c": b64(sealed.ciphertext),
    }


def parse(data: object) -> Sealed | None:
    """The sealed fields of stored entry data, or ``None`` if it is not a sealed
    entry of this format (a plaintext row, a foreign version, a mangled field)."""
    if not isinstance(data, dict) or set(data) != {SEALED_FIELD, "k", "d", "s", "n", "c"}:
        return None
    k, d, s = data["k"], data["d"], data["s"]
    if data[SEALED_FIELD] != VERSION or not isinstance(k, str) or not isinstance(d, str):
        return None
    if s not in (0, 1) or isinstance(s, bool):
        return None
    try:
        nonce, ciphertext = unb64(data["n"]), unb64(data["c"])
    except (binascii.Error, ValueError, TypeError):
        return None
    if len(nonce) != NONCE_BYTES or len(ciphertext) < TAG_BYTES:
        return None
    return Sealed(k, d, bool(s), nonce, ciphertext)


def new_data_key_id(namespace: str, session_id: str) -> str:
    """A fresh data key id that names its session: an entry moved to another
    session or namespace is then refused as moved, not as shredded."""
    return _session_bound(os.urandom(4).hex(), namespace, session_id)


def data_key_id_fits(data_key_id: str, namespace: str, session_id: str) -> bool:
    """Whether ``data_key_id`` was made for this namespace and session."""
    if len(data_key_id) != DATA_KEY_ID_CHARS:
        return False
    return _session_bound(data_key_id[:8], namespace, session_id) == data_key_id


def _session_bound(prefix: str, namespace: str, session_id: str) -> str:
    digest = hashlib.sha256(_ad(["fxworld-data-key-id", namespace, session_id, prefix]))
    return prefix + digest.hexdigest()[:8]


def entry_ad(
    namespace: str, session_id: str, kind: str, epoch: int | None, seq: int | None, s: Sealed
) -> bytes:
    """The associated data of an entry: everything that says where it belongs."""
    fields = ["fxworld-entry", VERSION, namespace, session_id, kind, epoch, seq]
    return _ad([*fields, s.key_id, s.data_key_id, int(s.seq_bound)])


def data_key_ad(namespace: str, session_id: str, key_id: str, data_key_id: str) -> bytes:
    """The associated data of a wrapped data key: its session and its key ids."""
    return _ad(["fxworld-data-key", VERSION, namespace, session_id, key_id, data_key_id])


def max_plaintext(inner_limit: int, key_ids: list[str]) -> int:
    """The largest plaintext whose sealed form fits ``inner_limit`` for every key."""
    room = inner_limit - max(_fixed_size(k) for k in key_ids)
    limit = 3 * (room // 4) - TAG_BYTES  # base64: 4 characters per 3 bytes
    if limit < 1:
        raise ConfigurationError(
            f"the inner world's max_entry_bytes ({inner_limit}) leaves no room for sealed data"
        )
    return limit


def _fixed_size(key_id: str) -> int:
    """The encoded size of a sealed entry's data without its ciphertext."""
    probe = Sealed(key_id, "0" * DATA_KEY_ID_CHARS, True, bytes(NONCE_BYTES), b"")
    return len(json.dumps(to_data(probe), separators=(",", ":")))


_AD_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True)
"""ASCII-only JSON: kinds may hold lone surrogates, which UTF-8 cannot encode."""


def _ad(fields: list[Any]) -> bytes:
    return _AD_ENCODER.encode(fields).encode("ascii")


def b64(raw: bytes) -> str:
    """Standard base64 text of ``raw``."""
    return base64.b64encode(raw).decode("ascii")


def unb64(text: object) -> bytes:
    """The bytes of base64 ``text``; ``binascii.Error`` or ``TypeError`` if it is not."""
    if not isinstance(text, str):
        raise TypeError("not a string")
    return base64.b64decode(text, validate=True)
