"""The cores a fleet gets on a machine others load, as the kernel shares them here.

With ``kernel.sched_autogroup_enabled`` (on here) the scheduler shares the cores
first between autogroups (one per session: each shell, each service) and only then
between the threads of a group, so a count of others' runnable threads does not say
what the fleet gets: a group of ten runnable threads weighs as much as a group of
one. :func:`runnable_groups` counts the runnable threads of every autogroup on the
machine (sampled while the fleet runs); :func:`fair_cores` fills the cores among
the groups, each group capped at its runnable threads (one core each at most)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["autogrouped", "fair_cores", "group_of", "runnable_groups"]

_groups: dict[int, str] = {}  # pid -> its autogroup (a pid's group does not change)


def autogrouped() -> bool:
    """True if the scheduler shares the cores between autogroups first."""
    with contextlib.suppress(OSError):
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    return False


def group_of(pid: int) -> str:
    """The autogroup of ``pid`` (``pid:N`` of its own where it has none: kernel
    threads, or every process where autogroups are off)."""
    if pid not in _groups:
        name = f"pid:{pid}"
        if autogrouped():
            with contextlib.suppress(OSError):
                name = (Path(f"/proc/{pid}/autogroup").read_text().split() or [name])[0]
        _groups[pid] = name
    return _groups[pid]


def runnable_groups() -> dict[str, int]:
    """Runnable threads (state R) now, by autogroup, over every process here (its
    threads read only where the process itself is not runnable and has several:
    a scan of every thread costs too much to repeat often)."""
    counts: dict[str, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
                threads = int(fields[17])
                running = 1 if fields[0] == "R" else _threads(entry.name) if threads > 1 else 0
                if running:
                    group = group_of(int(entry.name))
                    counts[group] = counts.get(group, 0) + running
    return counts


def _threads(pid: str) -> int:
    running = 0
    with contextlib.suppress(OSError):
        for task in os.scandir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"{task.path}/stat") as f:
                running += f.read().rsplit(")", 1)[1].split()[0] == "R"
    return running


def fair_cores(cores: float, demands: dict[str, float], ours: set[str]) -> float:
    """The cores the groups in ``ours`` get when ``cores`` are shared equally among
    the groups of ``demands`` (runnable threads each), none given more than it asks."""
    share, left, waiting = 0.0, cores, dict(demands)
    while waiting and left > 1e-9:
        each = left / len(waiting)
        capped = {g: d for g, d in waiting.items() if d <= each}
        if not capped:
            share += each * len(ours & waiting.keys())
            break
        for g, d in capped.items():
            left -= d
            share += d if g in ours else 0.0
            del waiting[g]
    return share
