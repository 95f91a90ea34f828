"""CPU of the fleet, the server and the driver, and others' runnable threads,
sampled with timestamps while benchmarks/bench_fleet.py runs, so that each figure
can be taken over the same window as the steady rate (the store's stamps and
``time.time()`` read one clock: every backend here runs on this machine)."""

from __future__ import annotations

import asyncio
import bisect
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from _fleet_probe import cpu_seconds
from _fleet_share import group_of, runnable_groups

__all__ = ["CpuSampler", "Usage"]


@dataclass
class Usage:
    """CPU seconds spent between two times (the workers, the server, this driver)
    and others' runnable threads on average over the samples between them."""

    workers: float
    server: float
    driver: float
    others: dict[str, float]  # autogroup -> its runnable threads, not ours


@dataclass
class CpuSampler:
    """Samples every ``every`` seconds from /proc; the server's pids are asked for
    at each sample (``server_pids``: a pool may open a backend at any time)."""

    workers: list[int]
    server_pids: Callable[[], Awaitable[list[int]]]
    every: float = 0.05
    times: list[float] = field(default_factory=list)
    samples: list[tuple[float, float, float]] = field(default_factory=list)
    others: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    seen: dict[int, float] = field(default_factory=dict)  # server pid -> CPU last seen

    async def run(self) -> None:
        """Sample until cancelled."""
        while True:
            self.sample(await self.server_pids())
            if len(self.times) % 2 == 1:  # every 0.1 s: a scan of /proc costs ~8 ms
                self.sample_others()
            await asyncio.sleep(self.every)

    def sample(self, server: list[int]) -> None:
        for pid in server:  # a server process gone keeps its last figure
            self.seen[pid] = max(self.seen.get(pid, 0.0), cpu_seconds(pid))
        workers = sum(cpu_seconds(p) for p in self.workers)
        self.times.append(time.time())
        self.samples.append((workers, sum(self.seen.values()), sum(os.times()[:2])))

    def at(self, t: float) -> tuple[float, ...]:
        """The counters at ``t``, linear between the samples around it."""
        i = min(max(1, bisect.bisect_left(self.times, t)), len(self.times) - 1)
        t0, t1 = self.times[i - 1], self.times[i]
        f = min(1.0, max(0.0, (t - t0) / (t1 - t0))) if t1 > t0 else 1.0
        a, b = self.samples[i - 1], self.samples[i]
        return tuple(x + f * (y - x) for x, y in zip(a, b, strict=True))

    def sample_others(self) -> None:
        """Runnable threads of every autogroup but the fleet's, the server's and
        this driver's."""
        ours = {group_of(p) for p in [*self.workers, *self.seen, os.getpid()]}
        found = runnable_groups()
        self.others.append((time.time(), {g: n for g, n in found.items() if g not in ours}))

    def between(self, t0: float, t1: float) -> Usage:
        start, end = self.at(t0), self.at(t1)
        # the window and a scan either side: a steady window may hold only one or two
        inside = [n for t, n in self.others if t0 - 0.1 <= t <= t1 + 0.1] or [self.others[-1][1]]
        others: dict[str, float] = {}
        for counts in inside:
            for g, n in counts.items():
                others[g] = others.get(g, 0.0) + n / len(inside)
        workers, server, driver = (y - x for x, y in zip(start, end, strict=True))
        return Usage(workers, server, driver, others)
