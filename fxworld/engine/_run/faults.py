"""Deterministic crash points for tests: ``FXWORLD_TEST_CRASH_AT=<point>[#n]``.

When the variable names a point, the process SIGKILLs itself the n-th time (first
by default) it reaches that point; ``FXWORLD_TEST_STALL_AT`` (same form) makes it
SIGSTOP itself there instead (a stalled worker, whose lease runs out while it
holds its state; a test sends SIGCONT). Points the engine passes:
``before-turn-started``, ``after-turn-started``, ``after-chunk``, ``before-message``,
``after-message`` (the reply saved with its calls' ``tool.started``, or with
``turn.finished``), ``after-tool-started`` (calls started again after a replay),
``after-tool-finished``, ``before-turn-finished`` (a reply saved without its
``turn.finished``: logs of older versions), ``after-approval-requested``,
``before-approved-call``, ``before-child-created`` and ``after-child-created`` (an
agent tool's call, around its child's first prompt). Tools in tests call
:func:`crash_point` themselves (``fxworld.testing.crash_point``) to die inside a tool.
The variable is read when this module is first imported (a test sets it in the
environment of the worker process it starts); unset (always, outside tests), a
point costs one comparison.
"""

from __future__ import annotations

import os
import signal

__all__ = ["crash_point", "ENV_VAR", "STALL_VAR"]

ENV_VAR = "FXWORLD_TEST_CRASH_AT"
STALL_VAR = "FXWORLD_TEST_STALL_AT"
_WANTED = {
    sig: os.environ.get(var)
    for sig, var in ((signal.SIGKILL, ENV_VAR), (signal.SIGSTOP, STALL_VAR))
    if os.environ.get(var)
}
_hits: dict[str, int] = {}


def crash_point(name: str) -> None:
    """SIGKILL this process if ``FXWORLD_TEST_CRASH_AT`` names this point (and
    hit), or SIGSTOP it if ``FXWORLD_TEST_STALL_AT`` does."""
    if not _WANTED:
        return
    for sig, wanted in _WANTED.items():
        point, _, nth = str(wanted).partition("#")
        if point != name:
            continue
        _hits[name] = _hits.get(name, 0) + 1
        if _hits[name] == int(nth or 1) or (sig == signal.SIGKILL and _hits[name] > int(nth or 1)):
            os.kill(os.getpid(), sig)
