"""EncryptedWorld: any world, with entry data sealed at rest (docs/encryption.md).

It keeps every guarantee W1-W19 of the world it wraps: each call is checked as the
protocol says (W15, with the limit on the *plaintext*), then forwarded with the
same ``fence``, ``key`` and ``wake``, so the inner world's atomicity, fencing, keys
and wakes are the ones that hold. What changes is what is stored as an entry's
data: a sealed envelope (:mod:`~fxworld.encryption.envelope`) bound to the entry's
position, which is why every append carries an ``expect=``, the caller's or its own
(:meth:`EncryptedWorld.append`). Kinds, positions, epochs, times, wakes, session
ids and the agent that owns each session (:class:`~fxworld.protocol.AgentRouter`,
delegated to the inner world) stay visible; a prompt's ``agent`` field is sealed
with its entry.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from fxworld import jsondata, validate
from fxworld.encryption.datakeys import DataKeys
from fxworld.encryption.envelope import Sealed, entry_ad, max_plaintext, parse, seal, to_data
from fxworld.encryption.envelope import unseal as open_sealed
from fxworld.encryption.keyring import ENV_VAR, Keyring, Keys, keys_from_env
from fxworld.errors import Conflict, InvalidSessionId, TamperedEntry
from fxworld.protocol import (
    AgentRouter,
    IdleDeleter,
    LastEntryReader,
    NamespaceDropper,
    SessionLister,
    WakeBatcher,
    WakeLister,
    World,
)
from fxworld.types import Entry, Fence, NewEntry, WakeLease, WakeState
from fxworld.validate import KEY_SESSION_PREFIX

__all__ = ["EncryptedWorld"]

DATA_KEY_CACHE = 10_000
"""How many sessions' data keys one EncryptedWorld keeps unwrapped in memory, and
how many sessions' last seqs it remembers."""


class EncryptedWorld:
    """Wraps ``inner`` so that every entry's data is sealed with AES-256-GCM under a
    data key of its session, wrapped by the key-encryption key ``keys`` names.

    ``keys``: a mapping of key id to 32 bytes, the first being the key that wraps
    the data keys of new entries (older ones only read), or one 32-byte key (id
    ``default``); :meth:`from_env` reads them from an environment variable. A bad
    key is a ``ConfigurationError`` here, naming the key id, never the key.

    ``key_world``: where the data keys live; by default ``inner`` itself, in
    companion sessions ``fxkey.<hash>`` (then ids starting with ``fxkey.`` are
    refused with ``InvalidSessionId`` and hidden from ``list_sessions``). Give a
    world that is backed up apart from ``inner`` for erasure that reaches backups.

    The optional protocols (``take_wakes``, ``list_sessions``, ``wake_state`` and
    ``list_wakes``, ``last_entry``, ``delete_if_idle``) are there exactly when
    ``inner`` has them.
    """

    take_wakes: Callable[..., Awaitable[list[WakeLease]]]
    """``inner.take_wakes`` (:class:`~fxworld.protocol.WakeBatcher`), if it has it."""
    list_wakes: Callable[..., Awaitable[list[WakeState]]]
    """``inner.list_wakes`` (:class:`~fxworld.protocol.WakeLister`), if it has it."""
    list_sessions: Callable[..., Awaitable[list[str]]]
    """The inner world's sessions without the companions (:class:`SessionLister`)."""
    wake_state: Callable[[str], Awaitable[WakeState | None]]
    """``inner.wake_state`` for a valid id (:class:`WakeLister`), if it has it."""
    last_entry: Callable[[str], Awaitable[Entry | None]]
    """``inner.last_entry``, opened as ``read`` opens it (:class:`LastEntryReader`)."""
    delete_if_idle: Callable[..., Awaitable[bool]]
    """``inner.delete_if_idle``, keeping the data keys as ``delete`` does
    (:class:`IdleDeleter`), if it has it."""
    claim: Callable[[str, str], Awaitable[str]]
    """``inner.claim`` for a valid id (:class:`AgentRouter`), if it has it. Agent
    names are not sealed: like kinds and session ids, they stay visible in the
    inner world (an owner record, and the wakes it routes)."""
    owner: Callable[[str], Awaitable[str | None]]
    """``inner.owner`` for a valid id (:class:`AgentRouter`), if it has it."""
    take_wakes_for: Callable[..., Awaitable[list[WakeLease]]]
    """``inner.take_wakes_for`` (:class:`AgentRouter`), if it has it."""
    rename_agent: Callable[[str, str], Awaitable[int]]
    """``inner.rename_agent``, if it has it (docs/engine.md, renaming an agent)."""
    drop_namespace: Callable[[], Awaitable[None]]
    """``inner.drop_namespace``, the data keys of a ``key_world`` given apart left
    (namespaces may share it), and this object's caches emptied
    (:class:`NamespaceDropper`), if ``inner`` has it."""

    def __init__(self, inner: World, keys: Keys, *, key_world: World | None = None) -> None:
        self.inner = inner
        self.key_world = inner if key_world is None else key_world
        self.keyring = Keyring(keys)
        self.namespace: str = str(getattr(inner, "namespace", "") or "")
        """Bound into every entry's associated data: the inner world's namespace."""
        self.capabilities: frozenset[str] = frozenset(inner.capabilities)
        inner_limit = int(getattr(inner, "max_entry_bytes", validate.DEFAULT_MAX_ENTRY_BYTES))
        self.max_entry_bytes = max_plaintext(inner_limit, self.keyring.ids)
        """The largest entry data, before sealing, whose sealed form the inner world takes."""
        self._fresh()
        self._optional_protocols(inner)

    def _fresh(self) -> None:
        self.data_keys = DataKeys(
            self.key_world, self.keyring, self.namespace, cache=DATA_KEY_CACHE
        )
        self.last_seqs = LastSeqs(DATA_KEY_CACHE)
        """The last seq this object saw of each recent session: where it expects
        its next append of that session to land."""

    def _optional_protocols(self, inner: World) -> None:
        if isinstance(inner, WakeBatcher):
            self.take_wakes = inner.take_wakes
        if isinstance(inner, SessionLister):
            self.list_sessions = self._list_sessions
        if isinstance(inner, WakeLister):
            self.list_wakes = inner.list_wakes
            self.wake_state = self._wake_state
        if isinstance(inner, LastEntryReader):
            self.last_entry = self._last_entry
        if isinstance(inner, IdleDeleter):
            self.delete_if_idle = self._delete_if_idle
        if isinstance(inner, NamespaceDropper):
            self.drop_namespace = self._drop_namespace
        if isinstance(inner, AgentRouter):
            self.claim = self._claim
            self.owner = self._owner
            self.take_wakes_for = inner.take_wakes_for
        renamer = getattr(inner, "rename_agent", None)
        if renamer is not None:
            self.rename_agent = renamer

    @classmethod
    def from_env(
        cls, inner: World, name: str = ENV_VAR, *, key_world: World | None = None
    ) -> EncryptedWorld:
        """Wrap ``inner`` with the keys of the environment variable ``name``
        (``id:BASE64,id:BASE64``, the first current; see ``keys_from_env``)."""
        return cls(inner, keys_from_env(name), key_world=key_world)

    def __repr__(self) -> str:
        return f"EncryptedWorld({self.inner!r}, key_ids={self.keyring.ids!r})"

    async def setup(self) -> None:
        await self.inner.setup()
        if self.key_world is not self.inner:
            await self.key_world.setup()

    async def _drop_namespace(self) -> None:
        assert isinstance(self.inner, NamespaceDropper)
        await self.inner.drop_namespace()
        self._fresh()  # the data keys it cached are gone with the namespace

    async def close(self) -> None:
        await self.inner.close()
        if self.key_world is not self.inner:
            await self.key_world.close()

    def _sid(self, value: object) -> str:
        """A valid session id that is not a companion's (W15), before any I/O."""
        sid = validate.session_id(value)
        if self.key_world is self.inner and sid.startswith(KEY_SESSION_PREFIX):
            raise InvalidSessionId(
                f"session id {sid!r} starts with {KEY_SESSION_PREFIX!r}, which names the "
                "data keys of an EncryptedWorld"
            )
        return sid

    async def acquire(self, session_id: str) -> Fence:
        fence = await self.inner.acquire(self._sid(session_id))  # its fence entry: W1
        self.last_seqs.saw(fence.session_id, fence.seq)
        return fence

    async def append(
        self,
        session_id: str,
        entries: Sequence[NewEntry],
        *,
        fence: Fence | None = None,
        expect: int | None = None,
        key: str | None = None,
        wake: float | None = None,
    ) -> int:
        """Seal each entry with the seq it will land at, and append them in one
        inner call with the same ``fence``, ``key`` and ``wake`` and an ``expect``:
        W2, W4, W6-W8 are the inner world's (W15 is checked here first).

        Without ``expect=`` from the caller, it appends with ``expect=`` the last
        seq it saw of the session (0 if none), so that each entry's seq is bound
        into its seal; when another writer came first (``Conflict``, which tells
        the actual last seq), it seals again for that position and retries. The
        inner world checks the key and the fence before ``expect`` (W6, W2), so a
        repeated key still returns the seq it landed at, a stale fence is still
        ``Fenced``, and the caller sees a ``Conflict`` only for its own
        ``expect=`` (W5): an unfenced append still always lands (W3)."""
        sid = self._sid(session_id)
        sid, encoded = validate.append(
            sid, entries, fence=fence, expect=expect, key=key, wake=wake,
            max_bytes=self.max_entry_bytes,
        )  # fmt: skip
        epoch = None if fence is None else fence.epoch
        at = self.last_seqs.get(sid) if expect is None else expect
        while True:
            sealed = await self._seal(sid, encoded, epoch, at)
            try:
                seq = await self.inner.append(
                    sid, sealed, fence=fence, expect=at, key=key, wake=wake
                )
            except Conflict as e:
                self.last_seqs.put(sid, e.last)
                if expect is not None or e.last == at:
                    raise  # the caller's own expect= (W5), or an inner world at odds with itself
                at = e.last  # another writer came first: nothing was written (W5)
                continue
            self.last_seqs.saw(sid, seq)
            return seq

    async def _seal(
        self, sid: str, encoded: list[tuple[str, str]], epoch: int | None, expect: int
    ) -> list[NewEntry]:
        """The sealed entries of one append call, under the session's data key, each
        bound to the seq it lands at when appended with ``expect=`` (W5)."""
        data_key_id, cipher = await self.data_keys.for_writing(sid)
        sealed: list[NewEntry] = []
        for i, (kind, text) in enumerate(encoded):
            seq = expect + 1 + i
            fields = Sealed(self.keyring.current, data_key_id, True, b"", b"")
            ad = entry_ad(self.namespace, sid, kind, epoch, seq, fields)
            nonce, ciphertext = seal(cipher, text.encode("utf-8"), ad)
            fields = replace(fields, nonce=nonce, ciphertext=ciphertext)
            sealed.append(NewEntry(kind, to_data(fields)))
        return sealed

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        sid = self._sid(session_id)
        validate.read_args(after, limit)
        entries = await self.inner.read(sid, after, limit=limit)
        opened = [await self.unseal(entry) for entry in entries]
        if opened:
            self.last_seqs.saw(sid, opened[-1].seq)
        return opened

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Entry]:
        sid = self._sid(session_id)
        validate.read_args(after, 1)
        return self._follow(sid, after)

    async def _follow(self, session_id: str, after: int) -> AsyncIterator[Entry]:
        stream = self.inner.follow(session_id, after)
        try:
            async for entry in stream:
                yield await self.unseal(entry)
        finally:
            closing: Any = getattr(stream, "aclose", None)
            if closing is not None:
                await closing()

    async def unseal(self, entry: Entry) -> Entry:
        """``entry`` with its data opened; ``TamperedEntry`` if it does not
        authenticate where it stands, ``MissingKey`` if its key is not at hand."""
        sid, seq = entry.session_id, entry.seq
        if entry.kind == validate.FENCE_KIND:
            # written by the inner world's acquire (W1): no secret, checked against its epoch
            if entry.data == {"epoch": entry.epoch} and entry.epoch is not None:
                return entry
            raise TamperedEntry(sid, seq, "a fence entry whose data is not its epoch")
        sealed = parse(entry.data)
        if sealed is None:
            why = "not sealed: a plaintext entry where a sealed one belongs"
            raise TamperedEntry(sid, seq, why)
        cipher = await self.data_keys.for_reading(sid, seq, sealed)
        bound = seq if sealed.seq_bound else None
        ad = entry_ad(self.namespace, sid, entry.kind, entry.epoch, bound, sealed)
        plaintext = open_sealed(cipher, sealed.nonce, sealed.ciphertext, ad)
        if plaintext is None:
            raise TamperedEntry(
                sid, seq, "authentication failed: its data was altered, or it was moved from "
                "another session, namespace, kind, epoch or position",
            )  # fmt: skip
        data = jsondata.decode(plaintext)
        return Entry(sid, seq, entry.kind, data, entry.epoch, entry.at)

    async def wake(self, session_id: str, *, delay: float = 0.0) -> None:
        await self.inner.wake(self._sid(session_id), delay=delay)

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        return await self.inner.take_wake(lease=lease)

    async def renew_wake(self, wake: WakeLease, *, lease: float) -> WakeLease:
        return await self.inner.renew_wake(wake, lease=lease)

    async def finish_wake(self, wake: WakeLease) -> None:
        await self.inner.finish_wake(wake)

    async def delete(self, session_id: str) -> None:
        """Delete the log (W14) and keep the session's data keys, so that an append
        racing the delete from another process stays readable; :meth:`shred` also
        deletes the keys."""
        sid = self._sid(session_id)
        self.data_keys.forget(sid)
        self.last_seqs.forget(sid)
        await self.inner.delete(sid)

    async def shred(self, session_id: str) -> None:
        """Erase a session: delete its data keys first (crypto-shredding: every copy
        of its entries, backups included, is unreadable from then on, while other
        sessions stay readable), then its log (W14). Safe to run again if
        interrupted. Stop the session's writers first: an append racing the shred
        from another process that still holds the old data key lands unreadable."""
        sid = self._sid(session_id)
        await self.data_keys.shred(sid)
        self.last_seqs.forget(sid)
        await self.inner.delete(sid)

    async def _last_entry(self, session_id: str) -> Entry | None:
        """The inner world's last entry, opened and authenticated as :meth:`read`
        opens it (``TamperedEntry`` or ``MissingKey`` as there)."""
        reader: Any = self.inner
        last: Entry | None = await reader.last_entry(self._sid(session_id))
        return None if last is None else await self.unseal(last)

    async def _delete_if_idle(self, session_id: str, *, last: int) -> bool:
        """The inner world's conditional delete; like :meth:`delete`, it keeps the
        session's data keys (an append racing it from another process stays
        readable): :meth:`shred` is for erasure."""
        sid = self._sid(session_id)
        deleter: Any = self.inner
        self.data_keys.forget(sid)
        self.last_seqs.forget(sid)
        deleted: bool = await deleter.delete_if_idle(sid, last=last)  # atomic there: W14
        return deleted

    async def _list_sessions(self, *, after: str = "", limit: int = 100) -> list[str]:
        after = validate.list_args(after, limit)
        lister: Any = self.inner
        if self.key_world is not self.inner:
            result: list[str] = await lister.list_sessions(after=after, limit=limit)
            return result
        found: list[str] = []
        while len(found) < limit:
            page: list[str] = await lister.list_sessions(after=after, limit=limit)
            found += [sid for sid in page if not sid.startswith(KEY_SESSION_PREFIX)]
            if len(page) < limit:
                break
            after = page[-1]
        return found[:limit]

    async def _claim(self, session_id: str, agent: str) -> str:
        router: Any = self.inner
        owner: str = await router.claim(self._sid(session_id), agent)
        return owner

    async def _owner(self, session_id: str) -> str | None:
        router: Any = self.inner
        owner: str | None = await router.owner(self._sid(session_id))
        return owner

    async def _wake_state(self, session_id: str) -> WakeState | None:
        lister: Any = self.inner
        state: WakeState | None = await lister.wake_state(self._sid(session_id))
        return state


class LastSeqs:
    """The last seq seen of each of the ``size`` sessions used last (LRU): where an
    append without ``expect=`` is expected to land. A guess only: a wrong one costs
    one ``Conflict``, which tells the right one."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.seqs: OrderedDict[str, int] = OrderedDict()

    def get(self, session_id: str) -> int:
        """The last seq seen of ``session_id``; 0 if none (a new session)."""
        return self.seqs.get(session_id, 0)

    def put(self, session_id: str, seq: int) -> None:
        """``seq`` is the session's last seq now (a ``Conflict`` said so)."""
        self.seqs[session_id] = seq
        self.seqs.move_to_end(session_id)
        while len(self.seqs) > self.size:
            self.seqs.popitem(last=False)

    def saw(self, session_id: str, seq: int) -> None:
        """An entry at ``seq`` exists: the last seq is at least that."""
        self.put(session_id, max(seq, self.get(session_id)))

    def forget(self, session_id: str) -> None:
        """The session was deleted: its log starts again from seq 1."""
        self.seqs.pop(session_id, None)
