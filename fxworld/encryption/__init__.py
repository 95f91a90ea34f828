"""Encryption at rest: :class:`EncryptedWorld` wraps any world (docs/encryption.md).

Needs the ``cryptography`` package (``pip install 'fxworld[encryption]'``);
importing ``fxworld`` does not load this package, ``fxworld.EncryptedWorld`` does.
"""

from fxworld.encryption.keyring import ENV_VAR, Keys, keys_from_env
from fxworld.encryption.world import EncryptedWorld

__all__ = ["EncryptedWorld", "Keys", "keys_from_env", "ENV_VAR"]
