"""Which fence a ``WorldSaver`` write carries: one writer per run, not per process.

A run of a graph takes its thread over when it starts (its first read in the root
namespace, :meth:`World.acquire`, W1) and writes every checkpoint and write, its
subgraphs' included, with that fence (W2). Two runs of one thread, in one saver,
in two savers of one process or in two processes, each hold their own fence: the
later one's refuses the earlier one's writes, so the chain never forks.

A write outside a run (``update_state``, ``bulk_update_state``, a direct call of
the saver) is an edit: it is written with a fence of its own, taken again when a
run took the thread over since (so any replica can edit a thread that is not
being run; an edit of a thread that is being run takes it over, and the run is
refused at its next write).

**How a run is recognised.** LangGraph has no public API that tells a
checkpointer which run called it: ``langgraph.config.get_config()`` and
``langgraph.runtime.get_runtime()`` raise outside a node, and the config a
checkpointer gets carries the run only under a private key. So the saver looks
for the public :class:`langgraph.runtime.Runtime` among the config's
``configurable`` values, by its type (never by the private key's name), and takes
its ``control`` (:class:`langgraph.runtime.RunControl`, created once per run and
shared by the run's subgraphs) as the run's identity. A config without one is
outside a run. A ``RunControl`` passed by the caller to two runs makes them one
run here, as LangGraph's docs ask for a fresh one per run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langgraph.runtime import Runtime

from fxworld.types import Fence

__all__ = ["RUNS_KEPT", "run_of", "Fences"]

RUNS_KEPT = 10_000
"""Runs whose fences a saver keeps (the oldest is forgotten first)."""


def run_of(config: Mapping[str, Any]) -> object | None:
    """The run that made this call (its ``RunControl``, else its ``Runtime``), or
    ``None`` outside a run (see the module)."""
    for value in config.get("configurable", {}).values():
        if isinstance(value, Runtime):
            return value.control if value.control is not None else value
    return None


class Fences:
    """The fences one saver holds: per run and thread, and per thread for edits."""

    def __init__(self, acquire: Callable[[str], Awaitable[Fence]]) -> None:
        self._acquire = acquire
        self._runs: dict[int, tuple[object, dict[str, Fence]]] = {}
        self._edits: dict[str, Fence] = {}

    async def start(self, sid: str, run: object) -> None:
        """A run's first read of ``sid``: take the thread over for it (W1)."""
        self._of(run)[sid] = await self._acquire(sid)

    def started(self, sid: str, run: object) -> bool:
        held = self._runs.get(id(run))
        return held is not None and held[0] is run and sid in held[1]

    async def fence(self, sid: str, run: object | None, again: bool = False) -> Fence:
        """The fence to write ``sid`` with for ``run`` (``None``: an edit). An edit's
        is taken at its first write, and ``again`` after a refusal; a run's at its
        first read (or first write, if it never read)."""
        if run is None:
            if again or sid not in self._edits:
                self._edits[sid] = await self._acquire(sid)
            return self._edits[sid]
        fences = self._of(run)
        if sid not in fences:
            fences[sid] = await self._acquire(sid)
        return fences[sid]

    def forget(self, sid: str) -> None:
        """Drop the edit fence of ``sid`` (stale after a delete or compaction, W14)."""
        self._edits.pop(sid, None)

    def _of(self, run: object) -> dict[str, Fence]:
        held = self._runs.get(id(run))
        if held is None or held[0] is not run:
            held = self._runs[id(run)] = (run, {})
            if len(self._runs) > RUNS_KEPT:
                del self._runs[next(iter(self._runs))]
        return held[1]
