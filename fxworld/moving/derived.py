"""What a copy re-derives from a log, because ``read`` does not return it: the
idempotency keys the turn engine appended entries with, and whether a session
owes a wake.

**Keys.** :meth:`~fxworld.protocol.World.read` returns no idempotency key (W6 keeps
keys inside the world). The engine's keyed kinds carry what their key is made of in
their data (docs/log-format.md), so a copy appends them on the target under the
same key, and a client that retries a prompt after the move (same key) still never
doubles it:

- ``prompt``: ``prompt:<data.key>`` (``Session.prompt``);
- ``approval.decided``: ``approval:<data.execution_id>`` (``decision_key``);
- ``stop.requested``: ``stop:<data.prompt>`` (``request_stop``);
- ``child.finished``: ``child:<data.execution_id>`` (``child_key``).

Keys of other appends (an application's own ``append(key=...)``) cannot be seen,
and are not carried.

**Wakes.** A session owes a wake while a prompt has no turn end (``turn.finished``,
``turn.failed``, ``turn.stopped``) answering it: an unanswered prompt, or a turn
that started, yielded, or waits for an approval. A worker woken on the target
re-derives what to do from the log, so a wake owed is one due now; a wake that
turns out not to be needed is finished at once by the worker.
"""

from __future__ import annotations

from fxworld.engine import log
from fxworld.engine.approvals import decision_key, stop_key
from fxworld.engine.subagents import child_key
from fxworld.types import Entry

__all__ = ["engine_key", "OpenTurns"]


def engine_key(entry: Entry) -> str | None:
    """The idempotency key the turn engine appended ``entry`` with, or ``None``."""
    d = entry.data
    if entry.kind == log.PROMPT and isinstance(d.get("key"), str):
        return f"prompt:{d['key']}"
    if entry.kind == log.APPROVAL_DECIDED and isinstance(d.get("execution_id"), str):
        return decision_key(d["execution_id"])
    if entry.kind == log.STOP_REQUESTED and isinstance(d.get("prompt"), int):
        return stop_key(d["prompt"])
    if entry.kind == log.CHILD_FINISHED and isinstance(d.get("execution_id"), str):
        return child_key(d["execution_id"])
    return None


class OpenTurns:
    """The prompts of a log that no turn end answers yet, seen entry by entry."""

    def __init__(self) -> None:
        self.open: set[int] = set()

    def see(self, entry: Entry) -> None:
        if entry.kind == log.PROMPT:
            self.open.add(entry.seq)
        elif entry.kind in log.TURN_END_KINDS:
            self.open.discard(entry.data.get("prompt"))

    @property
    def owes_wake(self) -> bool:
        """Whether a worker must run the session: a prompt is not answered yet."""
        return bool(self.open)
