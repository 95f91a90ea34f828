"""The code of fxworld as it was before agent routing, for tests of worlds it wrote.

:func:`unpack_before` takes the packages of :data:`BEFORE` from this checkout's git
history (``git archive``): a test runs them in a subprocess (``PYTHONPATH``) to
write a world the way a deployment of that code did, then opens it with today's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["BEFORE", "unpack_before"]

REPO = Path(__file__).resolve().parents[2]
BEFORE = "931e7fb6099fd4c31658500c5f59c3d75cf077da"
"""The last commit before agent routing (and before SQLite's schema 2)."""
PACKAGES = ("fxworld", "fxworld_postgres", "fxworld_redis", "fxworld_s3")


def unpack_before(root: Path) -> Path:
    """The packages of :data:`BEFORE`, unpacked into ``root``; returns ``root``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", BEFORE, *PACKAGES], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    return root
