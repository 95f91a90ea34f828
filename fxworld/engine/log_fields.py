"""The session id and turn on every log line of a worker's run.

A run sets them (:func:`set_fields`) in its own task's context, so whatever it
logs, from any module, carries them; :class:`LogFields`, on the
``fxworld.worker`` logger, puts them on each record as ``logging`` extras
(``record.session_id``, ``record.turn``; ``""`` outside a run), for a formatter
to show (``fxworld worker --log-format json`` does).
"""

from __future__ import annotations

import contextvars
import logging

__all__ = ["FIELDS", "LogFields", "set_fields"]

FIELDS = ("session_id", "turn")
"""The extras every record of the ``fxworld.worker`` logger carries."""

_fields: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar(
    "fxworld_log_fields", default=("", "")
)


def set_fields(session_id: str, turn: str) -> None:
    """The session id and turn of the run this task belongs to."""
    if _fields.get() != (session_id, turn):
        _fields.set((session_id, turn))


class LogFields(logging.Filter):
    """Gives each record ``session_id`` and ``turn`` (unless given as extras)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in zip(FIELDS, _fields.get(), strict=True):
            if not hasattr(record, name):
                setattr(record, name, value)
        return True
