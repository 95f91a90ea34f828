"""Stream cursors: opaque strings that name a position in one session's log.

A cursor is ``<seq in base 36>.<check>``, where ``check`` is a short digest of the
session id and the seq. Clients must treat it as opaque: store it, send it back.
The digest makes a cursor from another session, or a hand-edited one, fail with
:class:`~fxworld.errors.InvalidCursor` instead of silently skipping entries.
"""

from __future__ import annotations

import hashlib

from fxworld.errors import InvalidCursor

__all__ = ["encode_cursor", "decode_cursor"]

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _check(session_id: str, seq: int) -> str:
    return hashlib.blake2b(f"{session_id}\x00{seq}".encode(), digest_size=4).hexdigest()


def _b36(n: int) -> str:
    if n == 0:
        return "0"
    out = []
    while n:
        n, r = divmod(n, 36)
        out.append(_DIGITS[r])
    return "".join(reversed(out))


def encode_cursor(session_id: str, seq: int) -> str:
    """The cursor that stands just after entry ``seq`` of ``session_id`` (0: the start)."""
    if seq < 0:
        raise ValueError(f"seq must be >= 0, not {seq}")
    return f"{_b36(seq)}.{_check(session_id, seq)}"


def decode_cursor(session_id: str, cursor: str | None) -> int:
    """The seq a cursor stands after; ``None`` (or ``""``) is the start, 0.

    Raises :class:`InvalidCursor` for anything :func:`encode_cursor` did not
    produce for this session.
    """
    if cursor is None or cursor == "":
        return 0
    if not isinstance(cursor, str) or len(cursor) > 40:
        raise InvalidCursor(f"malformed stream cursor {str(cursor)[:40]!r}")
    head, sep, check = cursor.partition(".")
    if not sep or not head or any(c not in _DIGITS for c in head):
        raise InvalidCursor(f"malformed stream cursor {cursor!r}")
    seq = int(head, 36)
    if check != _check(session_id, seq):
        raise InvalidCursor(
            f"stream cursor {cursor!r} was not issued for session {session_id!r} (or was altered)"
        )
    return seq
