"""Print the hash of what pyproject.toml asks to install (requires-python, dependencies,
optional-dependencies). ``scripts/lock`` writes it into the lock's first line and
``scripts/test`` refuses a lock whose hash no longer matches."""

from __future__ import annotations

import hashlib
import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def deps_hash() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {
        key: project.get(key)
        for key in ("requires-python", "dependencies", "optional-dependencies")
    }
    return hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()[:16]


if __name__ == "__main__":
    sys.stdout.write(deps_hash() + "\n")
