"""Each session's data keys, kept in a companion session of their own.

A session ``s`` of namespace ``ns`` has its data keys in the session
``fxkey.<sha256 of ns and s in hex>`` (70 characters whatever the length of ``s``:
always a valid id, W15), one entry of kind ``data-key`` per key-encryption key that
has sealed entries of ``s``: the data key wrapped with AES-256-GCM under that key,
its associated data binding the namespace, ``s`` and both key ids. Deleting that companion session
(:meth:`DataKeys.shred`) makes every entry of ``s`` unreadable: crypto-shredding.

Two processes that make the first data key of a session (or its first under a new
key-encryption key) at the same moment both append with ``expect=`` the companion's
last seq; the world lets exactly one land (W5), and the other reads the winner's key
and uses it. Everyone uses the first data key the companion holds for a given
key-encryption key, so all processes seal a session's new entries alike.
"""

from __future__ import annotations

import binascii
import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field

from fxworld.encryption.envelope import (
    AESGCM,
    Sealed,
    b64,
    data_key_ad,
    data_key_id_fits,
    new_data_key_id,
    seal,
    unb64,
    unseal,
)
from fxworld.encryption.keyring import Keyring
from fxworld.errors import Conflict, MissingKey, TamperedEntry
from fxworld.protocol import World
from fxworld.types import Entry, NewEntry
from fxworld.validate import KEY_SESSION_PREFIX

__all__ = ["DataKeys", "DATA_KEY_KIND", "key_session"]

DATA_KEY_KIND = "data-key"
"""The kind of a companion session's entries."""

_PAGE = 1000


def key_session(namespace: str, session_id: str) -> str:
    """The companion session that holds the data keys of ``session_id`` in
    ``namespace`` (several namespaces may keep their keys in one ``key_world``)."""
    named = f"{namespace}\x00{session_id}".encode()
    return KEY_SESSION_PREFIX + hashlib.sha256(named).hexdigest()


@dataclass
class _SessionKeys:
    """What one read of a companion session gave."""

    last: int = 0
    """The companion's last seq."""
    ciphers: dict[str, tuple[str, AESGCM]] = field(default_factory=dict)
    """Data key id -> (id of the key that wraps it, its cipher)."""
    broken: dict[str, str] = field(default_factory=dict)
    """Data key id -> why it could not be unwrapped (not for a missing key id)."""
    tampered: str | None = None
    """Why an entry of the companion is not a data key that opens under the keys at
    hand (altered, swapped or moved), if one is not: a data key then missing was
    not shredded, so its entries are reported as tampered."""
    writing: dict[str, str] = field(default_factory=dict)
    """Key-encryption key id -> the first data key id it wraps: the one new entries use."""


class DataKeys:
    """The data keys of every session of one world, created once, cached (LRU)."""

    def __init__(self, world: World, keyring: Keyring, namespace: str, *, cache: int) -> None:
        self.world = world
        self.keyring = keyring
        self.namespace = namespace
        self.cache_size = cache
        self.cache: OrderedDict[str, _SessionKeys] = OrderedDict()

    async def for_writing(self, session_id: str) -> tuple[str, AESGCM]:
        """The id and cipher of the data key new entries of ``session_id`` use
        (wrapped by the current key), made on first use."""
        current = self.keyring.current
        state = self.cache.get(session_id)
        if state is None or current not in state.writing:
            state = await self.load(session_id)
        while current not in state.writing:
            state = await self.create(session_id, state)
        self.cache.move_to_end(session_id)
        data_key_id = state.writing[current]
        return data_key_id, state.ciphers[data_key_id][1]

    async def for_reading(self, session_id: str, seq: int, sealed: Sealed) -> AESGCM:
        """The cipher of the data key ``sealed`` names; ``MissingKey`` if its key id
        is not among the keys given or the data key was shredded."""
        if sealed.key_id not in self.keyring.ciphers:
            why = f"sealed under key id {sealed.key_id!r}, which is not among the keys given"
            raise MissingKey(session_id, seq, sealed.key_id, why)
        dk = sealed.data_key_id
        state = self.cache.get(session_id)
        if state is None or (dk not in state.ciphers and dk not in state.broken):
            if not data_key_id_fits(dk, self.namespace, session_id):
                why = "its data key is another session's: it was moved from another session"
                raise TamperedEntry(session_id, seq, why + " or namespace")
            state = await self.load(session_id)
        self.cache.move_to_end(session_id)
        if dk in state.broken:
            why = f"its data key was tampered with: it {state.broken[dk]}"
            raise TamperedEntry(session_id, seq, why)
        found = state.ciphers.get(dk)
        if found is None and state.tampered is not None:
            why = "its data key is missing and the session's wrapped keys were tampered with: "
            raise TamperedEntry(session_id, seq, why + state.tampered)
        if found is None:
            why = "its data key is gone (deleted: the session's keys were shredded)"
            raise MissingKey(session_id, seq, sealed.key_id, why)
        if found[0] != sealed.key_id:
            raise TamperedEntry(session_id, seq, "its key id is not the one of its data key")
        return found[1]

    async def shred(self, session_id: str) -> None:
        """Delete every data key of ``session_id`` (crypto-shredding)."""
        self.cache.pop(session_id, None)
        await self.world.delete(key_session(self.namespace, session_id))

    def forget(self, session_id: str) -> None:
        """Drop the cached keys of ``session_id`` (they are read again when needed)."""
        self.cache.pop(session_id, None)

    async def load(self, session_id: str) -> _SessionKeys:
        """Read the companion session whole and unwrap what the keys at hand can."""
        state = _SessionKeys()
        companion = key_session(self.namespace, session_id)
        while True:
            page = await self.world.read(companion, state.last, limit=_PAGE)
            for entry in page:
                self._unwrap(session_id, entry, state)
            state.last = page[-1].seq if page else state.last
            if len(page) < _PAGE:
                break
        self.cache[session_id] = state
        self.cache.move_to_end(session_id)
        while len(self.cache) > self.cache_size:
            self.cache.popitem(last=False)
        return state

    async def create(self, session_id: str, state: _SessionKeys) -> _SessionKeys:
        """Append a new data key wrapped by the current key, unless another process
        appended to the companion first (``Conflict``: W5); then read it again."""
        kek = self.keyring.current
        data_key_id = new_data_key_id(self.namespace, session_id)
        ad = data_key_ad(self.namespace, session_id, kek, data_key_id)
        nonce, wrapped = seal(self.keyring.ciphers[kek], AESGCM.generate_key(256), ad)
        data = {"k": kek, "d": data_key_id, "n": b64(nonce), "w": b64(wrapped)}
        try:
            await self.world.append(
                key_session(self.namespace, session_id),
                [NewEntry(DATA_KEY_KIND, data)],
                expect=state.last,
            )
        except Conflict:
            pass  # exactly one of the racing appends landed: the reload finds it
        return await self.load(session_id)

    def _unwrap(self, session_id: str, entry: Entry, state: _SessionKeys) -> None:
        data = entry.data
        kek, dk = data.get("k"), data.get("d")
        if entry.kind != DATA_KEY_KIND or not isinstance(kek, str) or not isinstance(dk, str):
            state.tampered = state.tampered or f"its entry {entry.seq} is not a data key"
            return
        cipher = self.keyring.ciphers.get(kek)
        if cipher is None:
            return  # its entries say which key id is missing (MissingKey)
        try:
            nonce, wrapped = unb64(data.get("n")), unb64(data.get("w"))
        except (binascii.Error, ValueError, TypeError):
            why = "is malformed"
        else:
            raw = unseal(cipher, nonce, wrapped, data_key_ad(self.namespace, session_id, kek, dk))
            if raw is not None and len(raw) == 32:
                if dk not in state.ciphers:
                    state.ciphers[dk] = (kek, AESGCM(raw))
                    state.writing.setdefault(kek, dk)
                return
            why = "failed authentication (altered, swapped or moved)"
        state.broken.setdefault(dk, why)
        state.tampered = state.tampered or f"its entry {entry.seq} {why}"
