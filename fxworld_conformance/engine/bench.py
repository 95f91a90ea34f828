"""What an engine scenario works with: :class:`Bench` (the fresh world under test,
agents on it, a worker run to the end, a simulated crash), and how a module
registers its scenarios (:class:`Part`).

The engine is reached only through fxworld's public names (``fxworld.Agent``,
``fxworld.tool``, ``fxworld.testing.ScriptedModel``), as an application reaches it,
and only when a scenario runs: the tier's modules name them as attributes of
``fxworld`` (loaded on first use), so importing the tier's table loads no module of
``fxworld.engine``;
the scenarios read what it wrote with the world's own ``read`` and know the
entry kinds from the log format (docs/log-format.md), the engine's public record.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import fxworld
from fxworld import World
from fxworld.types import Entry
from fxworld_conformance.target import CALL_TIMEOUT, Target

__all__ = ["Bench", "EngineScenario", "Part", "Crash", "check", "LIVE", "CRASH_LEASE"]

LIVE = 30.0
"""Seconds a turn may take on a loaded machine before the scenario fails as stuck."""

CRASH_LEASE = 0.3
"""Seconds of the lease a worker that will crash takes wakes under: renewed while
it runs, so it only bounds how long the next worker waits after the crash."""


def check(ok: bool, message: str) -> None:
    """Fail the scenario with ``message`` (what the engine did, and what it owes)."""
    if not ok:
        raise AssertionError(message)


class Crash:
    """A crash point that a scenario's tool passes: the first time, the worker's
    task is cancelled there, as the kit simulates a crash where it runs no OS
    process (the process tier on a world without ``shared``), and the worker stops
    (``stop``: its agent's ``stop``), so it takes nothing more, as a dead process
    would not. Nothing more of that run runs or is written, and its lease runs
    out; later passes do nothing."""

    def __init__(self) -> None:
        self.armed = True
        self.stop: Callable[[], None] = lambda: None

    def __call__(self) -> None:
        if self.armed:
            self.armed = False
            self.stop()
            raise asyncio.CancelledError("the kit's simulated crash")


class Bench:
    """The fresh world under test and what the scenarios do with it."""

    def __init__(self, world: World, target: Target) -> None:
        self.world = world
        self.target = target
        self._others: list[World] = []

    def agent(
        self, replies: list[Any], tools: Iterable[Any] = (), **options: Any
    ) -> fxworld.Agent[Any]:
        """An agent whose model plays ``replies``, on the world under test unless
        ``options`` name another."""
        from fxworld.testing import ScriptedModel  # the engine: only when a scenario runs

        options.setdefault("world", self.world)
        return fxworld.Agent(ScriptedModel(replies), tools=list(tools), **options)

    async def other_world(self) -> World:
        """Another fresh, empty world of the target (closed with the bench)."""
        namespace = self.target.fresh_namespace() if self.target.url else None
        other = await asyncio.wait_for(self.target.open(namespace), CALL_TIMEOUT)
        self._others.append(other)
        return other

    async def close(self) -> None:
        for other in self._others:
            await self.target.close(other)

    async def work(self, agent: fxworld.Agent[Any], *, lease: float = 15.0) -> None:
        """Run a worker of ``agent`` until nothing is due and nothing runs."""
        await asyncio.wait_for(agent.work(until_idle=True, lease=lease, concurrency=1), LIVE)

    async def until_crashed(self, agent: fxworld.Agent[Any], crash: Crash) -> None:
        """Run a worker of ``agent`` under :data:`CRASH_LEASE` until it crashes at
        ``crash`` (which stops it). A lease it lost meanwhile is taken again, so
        a loaded machine only delays the crash."""
        crash.stop = agent.stop
        work = agent.work(lease=CRASH_LEASE, poll_interval=0.02, concurrency=1)
        await asyncio.wait_for(work, LIVE)
        check(not crash.armed, "the worker reached the crash point in the tool")

    async def until_ended(self, agent: fxworld.Agent[Any], turn: Awaitable[Any]) -> Any:
        """Run a worker of ``agent`` until ``turn`` ends (a crashed worker's lease
        runs out first); the turn's result, or its error raised."""
        task = asyncio.create_task(agent.work(poll_interval=0.02, concurrency=1))
        try:
            return await asyncio.wait_for(_ended(turn, task), LIVE)
        finally:
            agent.stop()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def log(self, sid: str) -> list[Entry]:
        """The session's whole log, as the world reads it."""
        out: list[Entry] = []
        while batch := await asyncio.wait_for(self.world.read(sid, len(out)), CALL_TIMEOUT):
            out += batch
        return out

    async def kinds(self, sid: str) -> list[str]:
        return [e.kind for e in await self.log(sid)]


async def _ended(turn: Awaitable[Any], worker: asyncio.Task[Any]) -> Any:
    """``turn``'s outcome; a worker that ended first (it raised) fails the scenario."""
    waiting = asyncio.ensure_future(turn)
    await asyncio.wait({waiting, worker}, return_when=asyncio.FIRST_COMPLETED)
    if not waiting.done():
        waiting.cancel()
        error = worker.exception() if not worker.cancelled() else None
        raise AssertionError(f"the worker ended before the turn did: {error!r}")
    return waiting.result()


Run = Callable[[Bench], Awaitable[None]]

_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class EngineScenario:
    """``id`` names its pytest test (``test_engine[context-saved-and-seen]``),
    ``name`` its row in the kit's report (``engine context: ...``)."""

    id: str
    name: str
    part: str
    run: Run


class Part(list[EngineScenario]):
    """The scenarios of one part of the engine (``context``, ``answers``,
    ``steps``), in the order they are written; the function's name gives the id."""

    def __init__(self, part: str) -> None:
        super().__init__()
        self.part = part

    def __call__(self, title: str) -> Callable[[Run], Run]:
        def register(run: Run) -> Run:
            if _NAME.fullmatch(run.__name__) is None:
                raise ValueError(f"an engine scenario is named in snake case: {run.__name__}")
            slug = run.__name__.replace("_", "-")
            name = f"engine {self.part}: {title}"
            self.append(EngineScenario(f"{self.part}-{slug}", name, self.part, run))
            return run

        return register
