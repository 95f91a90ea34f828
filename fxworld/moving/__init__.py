"""Moving sessions between worlds: copy, export to a file, import, verify.

``fxworld copy``, ``fxworld export`` and ``fxworld import`` are these functions.
Everything goes through the public World protocol, so it works for any backend,
third-party ones included. What a copy keeps, and what it does not, is in
docs/backends.md ("Moving sessions between worlds") and in
:mod:`~fxworld.moving.replicate`.
"""

from __future__ import annotations

from .files import FileSummary, check_file, entry_limit, export_sessions, spooled
from .importing import import_file, marker_id
from .transfer import (
    SILENT,
    CopiedSession,
    Progress,
    copy_session,
    copy_sessions,
    session_ids,
    verify,
)

__all__ = [
    "copy_session",
    "copy_sessions",
    "export_sessions",
    "import_file",
    "marker_id",
    "check_file",
    "entry_limit",
    "spooled",
    "verify",
    "session_ids",
    "CopiedSession",
    "FileSummary",
    "Progress",
    "SILENT",
]
