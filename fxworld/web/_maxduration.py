"""The wake route's time limit on Vercel: the function's ``maxDuration``, read from
the ``vercel.json`` the function was deployed with.

Vercel gives a running Python function no value for its own ``maxDuration``: no
system environment variable, no request header, nothing in the Python runtime
(``vercel-runtime``'s ``vc_init``) nor in the ``vercel-*`` packages. It does ship
the project's files with the function: the Python builder bundles every file of
the project but a few build folders (``.git``, ``.vercel``, ``node_modules``,
virtual environments, ``public``, lock files), so ``vercel.json`` sits at the
root of the function's bundle. There, ``functions`` maps a glob of entrypoints to
each function's settings:

    {"functions": {"api/fxworld.py": {"maxDuration": 300,
                                      "experimentalTriggers": [{"type": "queue/v2beta", ...}]}}}

The entry is the one whose glob matches this function's entrypoint when the
runtime names it (``$__VC_HANDLER_ENTRYPOINT``, which Vercel's Python launcher
sets), else the ones with a queue trigger (the wake route is the function the
queue calls). Their ``maxDuration`` is the time limit when they give exactly one
number of seconds (``"max"``, the plan's limit, is not one: it cannot be known
here).
"""

from __future__ import annotations

import fnmatch
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["function_max_duration", "ENTRYPOINT_ENV"]

ENTRYPOINT_ENV = "__VC_HANDLER_ENTRYPOINT"
"""This function's entrypoint, relative to the bundle's root (Vercel's Python
launcher sets it, with ``__VC_HANDLER_ENTRYPOINT_ABS`` its absolute path)."""

_ENTRYPOINT_ABS_ENV = "__VC_HANDLER_ENTRYPOINT_ABS"


def function_max_duration(root: Path | None = None) -> float | None:
    """This function's ``maxDuration`` in seconds, from ``root/vercel.json``
    (``root``: the bundle's root, else the working directory); ``None`` when
    there is no such file, it is not JSON, or it gives this function no single
    number of seconds. See the module."""
    entrypoint = os.environ.get(ENTRYPOINT_ENV) or None
    config = _read(_config_path(root, entrypoint))
    functions = config.get("functions") if isinstance(config, dict) else None
    if not isinstance(functions, dict):
        return None
    if entrypoint is not None:
        chosen = [spec for glob, spec in functions.items() if _matches(glob, entrypoint)]
    else:
        chosen = [spec for spec in functions.values() if _queue_triggered(spec)]
    durations = {d for d in map(_seconds, chosen) if d is not None}
    return durations.pop() if len(durations) == 1 else None


def _seconds(spec: object) -> float | None:
    """A ``functions`` entry's ``maxDuration``, when it is a positive number."""
    value = spec.get("maxDuration") if isinstance(spec, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)


def _config_path(root: Path | None, entrypoint: str | None) -> Path:
    if root is None:
        absolute = os.environ.get(_ENTRYPOINT_ABS_ENV)
        if absolute and entrypoint and absolute.endswith(entrypoint):
            root = Path(absolute[: len(absolute) - len(entrypoint)] or ".")
        else:
            root = Path.cwd()
    return root / "vercel.json"


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _matches(glob: str, entrypoint: str) -> bool:
    """Whether a ``functions`` key names ``entrypoint`` (``**`` spans folders)."""
    return fnmatch.fnmatchcase(entrypoint, glob.lstrip("/")) or fnmatch.fnmatchcase(
        entrypoint, glob.lstrip("/").replace("**/", "")
    )


def _queue_triggered(spec: object) -> bool:
    triggers = spec.get("experimentalTriggers") if isinstance(spec, dict) else None
    return isinstance(triggers, list) and any(
        isinstance(t, dict) and str(t.get("type", "")).startswith("queue/") for t in triggers
    )
