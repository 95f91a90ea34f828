"""What a stream consumer sees of a session's log: :class:`StreamEvent`."""

from __future__ import annotations

from dataclasses import dataclass

from fxworld.types import JSONObject

__all__ = ["StreamEvent"]


@dataclass(frozen=True)
class StreamEvent:
    """One entry of a session's log, as a stream consumer sees it.

    ``cursor`` is opaque: give it back to ``stream()`` to continue right after this
    event, with no gap and no duplicate. ``kind`` and ``data`` follow
    ``docs/log-format.md`` (``kind`` is e.g. ``prompt``, ``text``, ``message``,
    ``tool.started``, ``turn.finished``; ignore kinds you do not know).
    """

    cursor: str
    kind: str
    data: JSONObject
