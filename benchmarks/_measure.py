"""What the server benchmarks share: a timed loop of concurrent workers, rounds
that pair each figure with its baseline measured just before it, and percentiles.

A disk's fsync rate on a shared machine drifts by 2x within a minute, so a
figure and its baseline taken minutes apart can give any ratio. Each round here
measures the baseline and then the figure back to back, and the ratio printed is
the median of the rounds' ratios.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from fxworld import NewEntry

if TYPE_CHECKING:
    from fxworld.protocol import World

T = TypeVar("T")


async def timed(workers: int, seconds: float, step: Callable[[int], Awaitable[int]]) -> float:
    """Run ``step(worker)`` in ``workers`` tasks for ``seconds``; ops/s (step returns ops)."""
    done = 0
    stop = time.perf_counter() + seconds

    async def loop(k: int) -> None:
        nonlocal done
        while time.perf_counter() < stop:
            ops = await step(k)  # not `done += await ...`: that reads `done` before awaiting
            done += ops

    start = time.perf_counter()
    await asyncio.gather(*(loop(k) for k in range(workers)))
    return done / (time.perf_counter() - start)


@dataclass(frozen=True)
class Paired:
    """Medians over rounds: the figure, its baseline, and the ratio of each round."""

    value: float
    raw: float
    ratio: float


async def paired(
    rounds: int, raw: Callable[[], Awaitable[float]], value: Callable[[], Awaitable[float]]
) -> Paired:
    """``rounds`` rounds of ``raw()`` then ``value()``, back to back."""
    pairs = [(await raw(), await value()) for _ in range(rounds)]
    return Paired(
        statistics.median(v for _, v in pairs),
        statistics.median(r for r, _ in pairs),
        statistics.median(v / r for r, v in pairs),
    )


async def median_of(rounds: int, value: Callable[[], Awaitable[float]]) -> float:
    return statistics.median([await value() for _ in range(rounds)])


class Rows:
    """The rows of a benchmark's table, each printed as it is measured.

    ``raw(workers)`` measures the baseline at a concurrency; a row given
    ``workers`` is paired with it round by round, the others are plain medians.
    """

    def __init__(self, rounds: int, raw: Callable[[int], Awaitable[float]]) -> None:
        self.rounds = rounds
        self.raw = raw
        self.rows: list[tuple[str, str, str, str]] = []  # name, value, raw, ratio

    async def add(
        self,
        name: str,
        unit: str,
        value: Callable[[], Awaitable[float]],
        workers: int | None = None,
    ) -> None:
        if workers is None:
            v = await median_of(self.rounds, value)
            self.rows.append((name, f"{v:,.0f} {unit}", "", ""))
            print(f"  {name}: {v:,.0f} {unit}", flush=True)
            return
        n = workers
        m = await paired(self.rounds, lambda: self.raw(n), value)
        self.rows.append((name, f"{m.value:,.0f} {unit}", f"{m.raw:,.0f} /s", f"{m.ratio:.0%}"))
        print(f"  {name}: {m.value:,.0f} {unit} (raw {m.raw:,.0f}/s, {m.ratio:.0%})", flush=True)


async def follow_latency(writer: World, follower: World, n: int) -> list[float]:
    """Seconds from ``writer``'s append call to ``follower``'s yield of it, ``n``
    times, paced 2 ms apart; both worlds on one namespace, closed afterwards."""
    await writer.setup()
    stream = follower.follow("s")
    await writer.append("s", [NewEntry("start", {})])
    await anext(stream)
    out = []
    try:
        for i in range(n):
            t = time.perf_counter()
            await writer.append("s", [NewEntry("message", {"i": i})])
            entry = await anext(stream)
            out.append(time.perf_counter() - t)
            assert entry.data == {"i": i}
            await asyncio.sleep(0.002)
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await follower.close()
        await writer.close()
    return out


def pct(values: list[float], p: float) -> float:
    """The ``p``th percentile of ``values`` (seconds), in milliseconds."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000


def run_on_s3(args: Any, bench: Callable[[Any], Awaitable[T]]) -> T:
    """``asyncio.run(bench(args))`` against ``args.endpoint``; without one, against a
    throwaway ``weed mini`` started here and stopped by its pid afterwards."""
    server = None
    if args.endpoint is None:
        from tests.support.s3_server import start_s3

        server = start_s3()
        args.endpoint = server.endpoint
        print(f"server: {server.name} at {args.endpoint}")
    try:
        return asyncio.run(bench(args))
    finally:
        if server is not None:
            server.stop()
