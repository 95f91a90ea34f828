"""The World protocol: the storage contract every fxworld backend keeps.

A *world* stores sessions. A *session* is named by a string id; its *log* is a list
of *entries* at dense positions ``seq = 1, 2, 3, ...``. A *fence* is the token a
process holds while it runs a session's turns; it carries an integer *epoch*. A
*wake* is a request that some worker run a session, taken under a *lease*.

The guarantees are numbered W1-W19. Every backend keeps all of them unless its
``capabilities`` say otherwise (W17); W19 (agent routing) is the guarantee of the
optional :class:`AgentRouter`, and a world without it is routed by
:func:`fxworld.take_wakes`'s fallback. The conformance kit
(``fxworld_conformance``) checks each of them by number, under concurrent writers
and crashes. Backends import only fxworld's public surface: this module, ``types``,
``errors``, ``validate``, ``urls`` and ``follow``.

Time. Due times and lease expiries are measured on the world's own clock (the
server's clock for a server backend), so workers with skewed clocks agree.

This module imports nothing of fxworld but the contract modules.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable

from fxworld.types import Entry, Fence, NewEntry, WakeLease, WakeState

__all__ = [
    "World",
    "WakeBatcher",
    "SessionLister",
    "WakeLister",
    "LastEntryReader",
    "IdleDeleter",
    "NamespaceDropper",
    "AgentRouter",
    "CAPABILITIES",
]

CAPABILITIES: dict[str, str] = {
    "durable": "acknowledged appends and wakes survive a crash of the process or server",
    "shared": "several OS processes can open the same world and see each other's writes",
    "push_follow": "follow() is woken by the writer rather than by polling",
    "restartable": "the kit's fixture can crash and restart the server (set by test fixtures)",
}
"""The capability names the kit knows, with what each promises (W17)."""


@runtime_checkable
class World(Protocol):
    """The storage of sessions. All I/O methods are coroutines.

    Guarantees (the kit cites these numbers):

    **W1 acquire.** :meth:`acquire` returns a fence whose epoch is greater than every
    epoch ever returned for that session, deleted or not. From the moment it
    returns, every fence with a lower epoch is stale. Acquire never blocks on, or
    waits for, the previous holder. It appends one entry of kind ``fence`` with data
    ``{"epoch": n}`` and epoch ``n``, so every takeover is part of the history.
    Kinds starting with ``fence`` are reserved and refused from callers.

    **W2 fenced append.** With ``fence=``, the append succeeds only if that fence is
    still the newest for the session; otherwise it raises
    :class:`~fxworld.errors.Fenced` and writes nothing. A replaced writer stays
    refused on every later attempt. Another session's fence is never the newest
    for this one: ``Fenced`` too.

    **W3 unfenced append.** Without ``fence=`` (prompts from clients), the append
    always succeeds (bad input and ``expect`` aside), between any two fenced
    appends. Its entries have ``epoch=None``.

    **W4 atomic, dense, ordered.** All entries of one call land together at
    consecutive positions, or none do, never interleaved with another call.
    Positions are dense from 1; the call returns the seq of its last entry. No
    entry is ever lost, moved, changed or duplicated once the call returned.

    **W5 expect.** ``expect=n`` appends only if the log's last seq is exactly ``n``
    (0 for an empty log); otherwise :class:`~fxworld.errors.Conflict` with
    ``last`` set to the actual last seq, and nothing is written.

    **W6 idempotency key.** ``key=k``: if a call with the same key already landed in
    this session, return that call's last seq and write nothing, even when the
    fence given is stale by now (that call did land) and whatever ``expect`` says.
    A client that retries a prompt after a timeout never duplicates it. The key is
    checked first, then the fence, then ``expect``.

    **W7 append + wake is atomic.** ``wake=d`` enqueues a wake (as
    ``wake(delay=d)``) in the same atomic step as the append: once ``append``
    returns, the wake will be delivered even if the caller dies at once; if the
    append fails (or was a keyed repeat), no wake is owed.

    **W8 epoch-monotone log.** Epochs of fenced entries never decrease along the
    log: a replaced writer never lands an entry after its successor's first entry.

    **W9 read.** ``read(after=n)`` returns the entries with ``seq > n`` in order, at
    most ``limit``, as a contiguous slice starting at ``n + 1`` (or empty). A read
    never shows an entry while an entry with a lower seq is still missing (no hole
    is filled later), never shows refused or uncommitted data, and reads of one
    caller never go backwards.

    **W10 follow.** ``follow(after=n)`` yields every entry after the cursor, in
    order, once, then waits for new ones and yields each within a bounded delay of
    its commit (push where the backend can, polling otherwise). Reconnecting with
    the last seq seen continues with no gap and no duplicate. The iterator runs
    until the caller stops iterating (``aclose()`` or ``break``).

    **W11 wake coalescing.** At most one pending wake per session: ``wake()`` on a
    session that already has one keeps the earlier due time. A wake is never
    delivered before its due time.

    **W12 lease.** :meth:`take_wake` hands a due wake to one caller under a lease;
    while the lease lasts nobody else gets that session's wake. A lease not renewed
    or finished in time expires and the wake is delivered again at once, with
    ``attempt + 1``: at-least-once delivery. :meth:`renew_wake` and
    :meth:`finish_wake` after expiry (or with a token that is no longer current)
    raise :class:`~fxworld.errors.LeaseLost` and change nothing.

    **W13 finish.** :meth:`finish_wake` removes the wake only if no ``wake()`` for
    that session arrived after it was taken; otherwise the session stays due (at
    the due time that later request asked for) and is delivered again with
    ``attempt = 1``. No request to run a session is ever lost.

    **W14 delete.** :meth:`delete` removes the log, its idempotency keys and its
    wake. Fences acquired before the delete are refused afterwards (``Fenced``);
    the next ``acquire`` still returns a greater epoch (W1). A deleted session
    reads as empty and a new append starts it again at seq 1.

    **W15 bad input.** Session ids are 1..128 characters of ``[A-Za-z0-9._:-]``,
    other than ``.`` and ``..``; anything else raises
    :class:`~fxworld.errors.InvalidSessionId` before any I/O (no key or path
    injection). ``.`` and ``..`` are refused because a backend that puts the id in
    a key or path as one segment (S3's ``s/{id}/...``) would name the parent or the
    same directory, and a server that normalises paths would map it elsewhere. Ids
    that merely hold dots (``a..b``, ``.x``, ``x.``) are not such segments and
    stay valid. Entry data must be a JSON object (string keys, JSON
    values, no NaN) and a kind 1..64 characters, not reserved; otherwise
    :class:`~fxworld.errors.InvalidEntry`. An entry whose encoded data is over the
    world's ``max_entry_bytes`` (default 64 MiB) raises
    :class:`~fxworld.errors.EntryTooLarge`. Nothing partial is written for a
    rejected call. An entry up to the limit, however large, is one entry saved in
    its call's atomic write (docs/large-values.md). Other arguments out of range raise
    :class:`~fxworld.errors.InvalidArgument`: a cursor, limit or ``expect`` that is
    not an integer from 0 (1 for a limit) to 2**63-1, a delay or lease that is not
    a number of seconds up to 100 years (over 0 for a lease), an empty or over-256
    character key. Data nested more than 500 deep (``validate.MAX_DATA_DEPTH``) is an
    ``InvalidEntry``, on every Python.
    :mod:`fxworld.validate` does all of these checks for a backend.

    **W16 errors.** Every error is in :mod:`fxworld.errors`: ``Fenced``,
    ``Conflict``, ``LeaseLost``; ``InvalidSessionId``, ``InvalidEntry``,
    ``EntryTooLarge`` (also ``ValueError``); ``BackendUnavailable`` (transient,
    retryable, also ``ConnectionError``); ``ConfigurationError``. Driver exceptions
    are translated in one module per backend and never leak. Credentials never
    appear in a repr or a message.

    **W17 capabilities.** A backend that cannot keep a promise says so in
    ``capabilities`` (see :data:`CAPABILITIES`), and the kit skips exactly the
    checks that need it and says so.
    """

    capabilities: frozenset[str]
    """What this world promises beyond W1-W16; names from :data:`CAPABILITIES`."""

    async def setup(self) -> None:
        """Create or migrate the schema, buckets or scripts. Idempotent and safe to
        run from several processes at once."""
        ...

    async def close(self) -> None:
        """Release connections and background tasks. Idempotent. A pool or client
        given by the application is left open: the application owns it."""
        ...

    async def acquire(self, session_id: str) -> Fence:
        """Take over ``session_id``: append a ``fence`` entry with a new, greater
        epoch and return its fence (W1). Never waits for the previous holder."""
        ...

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
        """Append ``entries`` (at least one) atomically; return the seq of the last.

        ``fence``: refuse with ``Fenced`` unless it is the newest (W2, W8).
        ``expect``: refuse with ``Conflict`` unless the last seq is ``expect`` (W5).
        ``key``: a repeat of a landed call returns its seq and writes nothing (W6).
        ``wake``: enqueue ``wake(delay=wake)`` in the same atomic step (W7).
        """
        ...

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        """The entries with ``seq > after``, in order, at most ``limit`` (W9).
        An unknown session reads as empty."""
        ...

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Entry]:
        """Every entry after ``after`` in order, then each new one as it commits (W10)."""
        ...

    async def wake(self, session_id: str, *, delay: float = 0.0) -> None:
        """Ask that some worker run ``session_id`` in ``delay`` seconds or later;
        coalesces with a pending wake, keeping the earlier due time (W11)."""
        ...

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        """Take one due wake under a lease of ``lease`` seconds, or ``None`` if no
        wake is due now. Never blocks waiting for one (W12). Several at once:
        :func:`fxworld.take_wakes` (:class:`WakeBatcher`)."""
        ...

    async def renew_wake(self, wake: WakeLease, *, lease: float) -> WakeLease:
        """Extend a held lease to ``lease`` seconds from now; ``LeaseLost`` if it
        expired or was taken by another (W12)."""
        ...

    async def finish_wake(self, wake: WakeLease) -> None:
        """Done with this delivery: remove the wake unless a newer ``wake()``
        arrived since it was taken (W13); ``LeaseLost`` if the lease is gone."""
        ...

    async def delete(self, session_id: str) -> None:
        """Remove the session's log, keys and wake; refuse its old fences (W14)."""
        ...


@runtime_checkable
class WakeBatcher(Protocol):
    """Optional: a world that takes due wakes in batches natively.

    A worker that runs several sessions side by side asks for up to ``limit``
    wakes in one call. Callers use :func:`fxworld.take_wakes`, which every world
    answers: it asks a world that has this method, and builds the batch from
    :meth:`World.take_wake` (up to ``limit`` calls) for one that has not. A world
    implements it only to take a batch in fewer round trips than that; a third-party
    world satisfies it by having the method, without subclassing anything. The
    memory, SQLite, PostgreSQL, Redis and S3 worlds have it.

    What holds for a batch, native or built (the kit checks it like ``take_wake``):

    - **One lease per wake.** Each wake in the batch is leased exactly as if
      :meth:`World.take_wake` had taken it alone, and W11-W13 hold for each: none is
      handed out before its due time (W11); while its lease lasts nobody else gets
      that session's wake, in this batch or another (W12); each lease is renewed,
      finished or left to expire on its own, and an expired one is delivered again
      with ``attempt + 1`` (W12); a ``wake()`` that arrives after the batch was
      taken keeps that session due after its ``finish_wake`` (W13).
    - **Each session at most once.** A batch never holds two leases of one session.
    - **Bounded, maybe short.** At most ``limit`` wakes; it may hold fewer than
      asked even when more are due (another worker took them at the same moment, a
      partitioned world looked in fewer places). It is empty only when
      ``take_wake`` would have returned ``None``. It never blocks waiting for a
      wake to come due.
    - **Due order.** A world that keeps its wakes in due order (memory, SQLite,
      PostgreSQL, Redis on one server) fills a batch with the earliest due of the
      wakes it can take; the order of the list itself is not promised. S3 tries
      due sessions in random order, so that racing workers rarely collide.
    - **Not atomic as a whole.** If the call fails part way (``BackendUnavailable``),
      a wake it had already leased stays leased until its lease ends and is then
      delivered again (W12): none is lost.
    - **Bad input (W15).** ``lease`` is checked as for ``take_wake``; ``limit`` is an
      integer from 1 to ``validate.MAX_WAKE_BATCH`` (1000), else
      :class:`~fxworld.errors.InvalidArgument` before any I/O, with the same message
      on every world (:func:`fxworld.validate.wake_batch`).
    """

    async def take_wakes(self, *, lease: float, limit: int = 10) -> list[WakeLease]:
        """Take up to ``limit`` due wakes, each under its own lease of ``lease``
        seconds; ``[]`` if none is due now. Never blocks waiting for one."""
        ...


@runtime_checkable
class SessionLister(Protocol):
    """Optional: a world that can list its sessions (used by ``fxworld sessions list``).

    Not part of W1-W19; the kit does not require it.
    """

    async def list_sessions(self, *, after: str = "", limit: int = 100) -> list[str]:
        """Ids of sessions with a non-empty log, in ascending order, greater than
        ``after``, at most ``limit``: page with the last id returned."""
        ...


@runtime_checkable
class WakeLister(Protocol):
    """Optional: a world that can say which wakes are pending, and who holds them.

    Read-only: neither method takes, renews or finishes a wake, so W11-W13 are
    untouched. The inspector shows these; ``fxworld.prune`` keeps a session whose
    wake is due or leased. Not part of W1-W19; the kit checks it where a world has it.
    A third-party world satisfies it by having both methods.
    """

    async def wake_state(self, session_id: str) -> WakeState | None:
        """The session's pending wake, or ``None`` if it has none (finished, never
        woken, or deleted). Bad ids raise ``InvalidSessionId`` (W15)."""
        ...

    async def list_wakes(self, *, after: str = "", limit: int = 100) -> list[WakeState]:
        """Pending wakes (due or not, leased or not), by ascending session id greater
        than ``after``, at most ``limit``: page with the last id returned. Arguments
        are checked as for ``list_sessions`` (``validate.list_args``)."""
        ...


@runtime_checkable
class LastEntryReader(Protocol):
    """Optional: a world that gives a session's last entry in one request.

    ``fxworld.prune`` reads it to see how long a session has been idle (its ``at``)
    and where its log ends. Without it, the end is found by one-entry reads
    (gallop, then bisect: about 2 log2(n) requests for a log of n entries). Not
    part of W1-W19; the kit checks it where a world has it
    (``fxworld_conformance.guarantees.prune``).
    """

    async def last_entry(self, session_id: str) -> Entry | None:
        """The entry with the greatest seq, or ``None`` for an empty (or deleted)
        log; as ``read`` would return it (W9: never one whose lower seqs are still
        missing). Bad ids raise ``InvalidSessionId`` (W15)."""
        ...


@runtime_checkable
class IdleDeleter(Protocol):
    """Optional: a world that deletes a session only if nothing happened to it
    since it was looked at: the delete ``fxworld.prune`` needs.

    ``delete`` (W14) alone cannot prune safely: a prompt appended between the
    look ("idle for 30 days") and the delete would be deleted with the log,
    although its append returned (a lost prompt). ``delete_if_idle`` checks and
    deletes in one atomic step, so an append or a pending wake always wins. Not
    part of W1-W19; the kit checks it where a world has it
    (``fxworld_conformance.guarantees.prune``).
    """

    async def delete_if_idle(self, session_id: str, *, last: int) -> bool:
        """Delete the session as :meth:`World.delete` does (log, keys, wake; old
        fences refused: W14), but only if its log's last seq is still ``last``
        (> 0) and it has no pending wake (due or not, leased or not), checked and
        done in one atomic step with respect to appends (W4, W7) and wakes.
        Returns whether it deleted. A ``wake()`` that races with it either makes it
        refuse or is kept after the delete (as a wake of an empty session): never
        lost. ``last`` is an integer from 1 to 2**63-1, else ``InvalidArgument``;
        bad ids raise ``InvalidSessionId`` (W15); both before any I/O."""
        ...


@runtime_checkable
class NamespaceDropper(Protocol):
    """Optional: a world that can remove its whole namespace from the storage.

    Every world takes a namespace, and two namespaces on one server share nothing;
    this removes one of them. The conformance kit gives each check fresh namespaces
    and drops each one when the check ends (also after a failure or Ctrl-C), so a
    kit run leaves nothing in the database it was pointed at; a world without this
    method leaves them, and the kit says which (docs/conformance.md). Applications
    may use it to remove a tenant or a test environment. Not part of W1-W19.
    A third-party world satisfies it by having the method.
    """

    async def drop_namespace(self) -> None:
        """Remove everything stored under this world's namespace: every session's
        log, keys and wake, and what ``setup()`` made for the namespace alone (the
        memory world: its contents; SQLite: the namespace's rows of the file;
        PostgreSQL: the schema ``fxworld_<namespace>``; Redis: every key of the
        namespace, on every node of a Cluster; S3: every object under
        ``{prefix}{namespace}/``). Other namespaces, and what they share (the
        SQLite file, the bucket, Redis' scripts), are untouched.

        Idempotent: a namespace that was never set up, or is already gone, is no
        error, and nothing is created to drop it. Not atomic, and meant for a
        namespace nobody uses any more: a call of another world on it while it
        runs may fail or leave part of it behind. Afterwards the world is as if
        new: ``setup()`` makes the namespace again, empty; ``close()`` it as usual.
        """
        ...


@runtime_checkable
class AgentRouter(Protocol):
    """Optional: a world that knows which agent owns each session, and hands an
    agent's runners only that agent's wakes (W19, agent routing).

    Each session belongs to one agent (``Agent(name=...)``): the first prompt records
    it with :meth:`claim`. A runner of agent ``a`` (``agent.work()``, ``fxworld
    worker``, the wake routes, ``lambda_handler``) takes its wakes with
    :func:`fxworld.take_wakes` ``(world, ..., agent="a")``, which calls
    :meth:`take_wakes_for` on a world that has it. What a world without it gets is
    in :mod:`fxworld.wakes` (docs/contract.md). A third-party world satisfies it by
    having the three methods.

    **W19 agent routing.**

    - :meth:`claim` is an atomic set-if-absent: of two racing claims of one session,
      one agent wins and both calls return the winner. Once recorded, an owner
      never changes (except by a rename the application asks for: docs/engine.md).
    - :meth:`take_wakes_for` keeps what :class:`WakeBatcher` promises for a batch
      (W11-W13 per wake, each session at most once, at most ``limit``, never
      blocks), and hands out only wakes of sessions owned by ``agent`` or owned by
      nobody (a session written before owners were recorded, or woken before its
      first prompt): never a wake of another agent's session. Each
      :class:`~fxworld.types.WakeLease` carries the owner it found (``agent``).
    - **No starvation.** An agent's due wakes are found whatever the number of
      other agents' due wakes ahead of them: the world looks them up by owner (an
      index), it does not scan through, take and release others' wakes.
    - ``delete``, ``delete_if_idle`` and ``drop_namespace`` remove the owner record
      with the session (W14): a session made again later is claimed afresh.
    - Bad input (W15), before any I/O: a bad session id is ``InvalidSessionId``; a
      bad agent name (:func:`fxworld.validate.agent_name`), ``lease`` or ``limit``
      is ``InvalidArgument``.
    """

    async def claim(self, session_id: str, agent: str) -> str:
        """Record ``agent`` as the session's owner unless one is recorded (atomic
        set-if-absent). Returns the owner now recorded: ``agent``, or the earlier one."""
        ...

    async def owner(self, session_id: str) -> str | None:
        """The session's recorded owner, or ``None`` if none is recorded."""
        ...

    async def take_wakes_for(self, agent: str, *, lease: float, limit: int = 10) -> list[WakeLease]:
        """Take up to ``limit`` due wakes of sessions owned by ``agent`` or by nobody,
        each under its own lease of ``lease`` seconds; ``[]`` if none is due."""
        ...
