"""The one error hierarchy of fxworld (contract W16), in two sections.

- **What a world raises** (the World contract, W16): :class:`WorldError`, the root,
  and the errors of the protocol's calls (fences, ``expect=``, leases, input checks,
  an unreachable store, a world that cannot be built), with the two an
  :class:`~fxworld.EncryptedWorld` adds on read. Backends translate their driver's
  exceptions into these in exactly one module, so no driver exception ever reaches
  the caller. The kit checks that a world raises nothing else.
- **What the engine raises** (sessions, approvals, forks, copies, models): errors
  no World raises, for the application that drives sessions. Each is a
  :class:`WorldError` too: every error fxworld raises is one.

Messages never contain credentials. Every name here is importable from
``fxworld.errors``; this module imports nothing else of fxworld.
"""

from __future__ import annotations

__all__ = [
    # what a world raises
    "WorldError",
    "Fenced",
    "Conflict",
    "LeaseLost",
    "InvalidSessionId",
    "InvalidEntry",
    "EntryTooLarge",
    "InvalidArgument",
    "BackendUnavailable",
    "ConfigurationError",
    "TamperedEntry",
    "MissingKey",
    # what the engine raises
    "InvalidCursor",
    "KeyReused",
    "InvalidContext",
    "ContextMismatch",
    "WrongAgent",
    "UnknownSession",
    "AlreadyDecided",
    "ApprovalExpired",
    "UnknownCall",
    "SessionDiverged",
    "ModelError",
]


# -- What a world raises ---------------------------------------------------------------
# The World contract's errors (W16): a backend raises these and nothing else.


class WorldError(Exception):
    """Base class of every error fxworld raises."""


class Fenced(WorldError):
    """A fenced append or operation was refused: a newer fence exists (W2, W14).

    The writer holding the stale fence was replaced; it must stop at once and
    write nothing more. Nothing of the refused call was written.
    """

    def __init__(
        self, session_id: str, epoch: int, current: int | None = None, *, why: str = "is stale"
    ) -> None:
        self.session_id = session_id
        self.epoch = epoch
        self.current = current
        newer = f" (newest is {current})" if current is not None else ""
        super().__init__(f"session {session_id!r}: fence epoch {epoch} {why}{newer}")


class Conflict(WorldError):
    """``expect=n`` did not match the log's last seq (W5). Nothing was written.

    ``last`` is the log's actual last seq, ``expected`` the one the caller gave.
    """

    def __init__(self, session_id: str, expected: int, last: int) -> None:
        self.session_id = session_id
        self.expected = expected
        self.last = last
        super().__init__(f"session {session_id!r}: expected last seq {expected}, log is at {last}")


class LeaseLost(WorldError):
    """The wake lease expired or was taken by another worker (W12).

    Raised by ``renew_wake`` and ``finish_wake`` when the lease is no longer the
    caller's; the wake is then delivered again, so no request is lost.
    """


class InvalidSessionId(WorldError, ValueError):
    """A session id is not 1..128 characters of ``[A-Za-z0-9._:-]``, or is ``.`` or
    ``..`` (W15)."""


class InvalidEntry(WorldError, ValueError):
    """An entry's kind or data is not acceptable (W15). Nothing was written."""


class EntryTooLarge(InvalidEntry):
    """An entry's encoded data is larger than the world's limit (W15).

    ``size`` is the entry's encoded size in bytes, ``limit`` the world's limit.
    """

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"entry of {size} bytes is over the limit of {limit} bytes")


class InvalidArgument(WorldError, ValueError):
    """Any other argument out of its range (a negative delay, a zero limit, ...)."""


class BackendUnavailable(WorldError, ConnectionError):
    """The storage could not be reached or failed transiently; safe to retry.

    When raised by ``append``, the append may or may not have landed: retry it
    with the same idempotency ``key`` to find out without duplicating it.
    """


class ConfigurationError(WorldError):
    """The world cannot be built as asked: unknown URL scheme, missing extra, bad option."""


class TamperedEntry(WorldError):
    """An entry of an :class:`~fxworld.EncryptedWorld` failed authentication: its
    sealed data was altered, it was copied from another session, namespace, kind or
    position, or it is a plaintext row where a sealed one belongs. Its data is not
    returned. ``session_id`` and ``seq`` say which entry; ``why`` what was wrong."""

    def __init__(self, session_id: str, seq: int, why: str) -> None:
        self.session_id = session_id
        self.seq = seq
        self.why = why
        super().__init__(f"session {session_id!r}: entry {seq} refused: {why}")


class MissingKey(WorldError, LookupError):
    """An entry of an :class:`~fxworld.EncryptedWorld` names a key that is not at
    hand: a key id not among the keys given (``key_id``), or a session data key that
    was deleted (crypto-shredded). Never carries key material."""

    def __init__(self, session_id: str, seq: int, key_id: str, why: str) -> None:
        self.session_id = session_id
        self.seq = seq
        self.key_id = key_id
        super().__init__(f"session {session_id!r}: entry {seq}: {why}")


# -- What the engine raises ------------------------------------------------------------
# Errors no World raises: the engine's, for the application that drives sessions
# (prompts, streams, approvals, forks and copies) and for the models it calls.


class InvalidCursor(WorldError, ValueError):
    """A stream cursor that fxworld did not produce, or that was altered."""


class KeyReused(WorldError, ValueError):
    """An idempotency key came again with a different request: the entry saved
    under it first is not the one asked for now. Nothing was written.

    ``seq`` is where the entry saved under ``key`` stands.
    """

    def __init__(self, session_id: str, key: str, seq: int) -> None:
        self.session_id = session_id
        self.key = key
        self.seq = seq
        super().__init__(
            f"session {session_id!r}: idempotency key {key!r} was already used for "
            f"another request (saved at seq {seq})"
        )


class InvalidContext(InvalidArgument):
    """A session's context that is not a JSON object, or that the agent's
    ``context_type`` refuses. Refused before any I/O: nothing was written."""


class ContextMismatch(WorldError):
    """A session was named with a context other than the one saved when it was
    created: a session's context never changes. Nothing was written."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"session {session_id!r} was created with another context; "
            "a session's context never changes"
        )


class WrongAgent(WorldError):
    """A prompt (or a run) reached a session through an agent other than the one
    that owns it: the session belongs to ``owner``, the call came through
    ``agent``. Nothing was written. Each session belongs to the agent whose name
    its first prompt recorded (``Agent(name=...)``, docs/engine.md)."""

    def __init__(self, session_id: str, owner: str, agent: str) -> None:
        self.session_id = session_id
        self.owner = owner
        self.agent = agent
        super().__init__(
            f"session {session_id!r} belongs to agent {owner!r}, not to agent {agent!r}"
        )


class UnknownSession(WorldError, LookupError):
    """No session ``session_id`` exists here (its log is empty). Nothing was written."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"no session {session_id!r}")


class AlreadyDecided(WorldError):
    """The call ``execution_id`` was already decided the other way (the first
    decision wins: an approval after a denial, or a timeout, is refused).
    ``approved`` is the decision that stands. Nothing was written."""

    def __init__(self, session_id: str, execution_id: str, approved: bool) -> None:
        self.session_id = session_id
        self.execution_id = execution_id
        self.approved = approved
        how = "approved" if approved else "denied"
        super().__init__(f"session {session_id!r}: call {execution_id!r} was already {how}")


class ApprovalExpired(AlreadyDecided):
    """A decision on call ``execution_id`` came after its ``approval_timeout``: the
    call is no longer waiting, its timeout decided it (denied), and this decision
    was refused. Nothing of it was written; the timeout's denial (the one the model
    hears) stands, written by whichever process saw the expiry first.

    An :class:`AlreadyDecided` whose ``approved`` is ``False``, so code that
    catches that keeps working."""

    def __init__(self, session_id: str, execution_id: str) -> None:
        super().__init__(session_id, execution_id, False)
        self.args = (
            f"session {session_id!r}: the approval of call {execution_id!r} expired "
            "(its approval_timeout passed): the call was denied",
        )


class UnknownCall(WorldError, LookupError):
    """No call ``execution_id`` waits for a decision in this session (never asked,
    or its turn ended). Nothing was written."""

    def __init__(self, session_id: str, execution_id: str) -> None:
        self.session_id = session_id
        self.execution_id = execution_id
        super().__init__(f"session {session_id!r}: no call {execution_id!r} waits for a decision")


class SessionDiverged(WorldError):
    """A session cannot be copied on: its log in the target world is not the start
    of its log in the source (another process wrote to the target, or the source
    was deleted and begun again), or the source's log cannot be reproduced
    through the World protocol. Nothing more was written to that session.

    ``seq`` is the first position where the two differ.
    """

    def __init__(self, session_id: str, seq: int, why: str) -> None:
        self.session_id = session_id
        self.seq = seq
        super().__init__(f"session {session_id!r} at seq {seq}: {why}")


class ModelError(WorldError):
    """A model call failed. ``retryable`` says whether trying again may help (the
    engine retries it ``model_retries`` times, with backoff); ``status`` is the
    provider's HTTP status, when there was one.

    Raised by a :class:`~fxworld.models.base.Model` (the adapters, ``ScriptedModel``
    past its last reply) and by the engine when a model's stream ends without a
    response; the turn then fails. Importable from :mod:`fxworld.models` as before.

    Why a :class:`WorldError`: that is the root of every error fxworld raises
    (``TurnFailed``, ``ToolTimedOut`` and the engine's other errors are ones too),
    so ``except WorldError`` catches all of fxworld's errors and only those, and the
    command line reports a model's failure in one line, not a traceback. It is not a
    world's error: no World raises it and the kit never expects it, and its
    ``retryable`` is the model's own, not :class:`BackendUnavailable`'s retry of the
    storage."""

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
