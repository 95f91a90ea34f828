"""What EncryptedWorld costs per append and per read, beside the plain world it wraps.

Prints a table (nothing is asserted). Each figure is paired with the same figure on
the plain world, measured just before it in the same run on the same store (a fresh
namespace each), and the ratio printed is the median of the rounds' ratios (see
``_measure.py``). CPU per append (user + system, all threads of this process) is
hardly affected by other load on the machine; rates are.

    python benchmarks/bench_encryption.py                  # SQLite (a temporary file)
    python benchmarks/bench_encryption.py --postgres       # and a throwaway PostgreSQL
    python benchmarks/bench_encryption.py --url postgresql://user@host/db

Rows per store: single-entry appends/s from 1 and 8 tasks (one session each, data
keys cached after the first append), batches of 10, reads of 100 entries/s, CPU
per single-entry append, and the first append of a new session (it makes the
session's data key: one more read and one more append, on the companion session).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import paired, timed

from fxworld import EncryptedWorld, NewEntry, SqliteWorld
from fxworld.protocol import World

ENTRY = NewEntry("message", {"role": "assistant", "text": "x" * 200, "tokens": 57})
KEYS = {"k1": os.urandom(32)}
Opener = Callable[[str], World]  # namespace -> a plain world


async def _fresh(open_plain: Opener, encrypted: bool) -> World:
    inner = open_plain("bench_" + uuid.uuid4().hex[:12])
    world: World = EncryptedWorld(inner, KEYS) if encrypted else inner
    await world.setup()
    return world


def append_rate(open_plain: Opener, encrypted: bool, workers: int, batch: int, seconds: float):  # type: ignore[no-untyped-def]
    async def measure() -> float:
        world = await _fresh(open_plain, encrypted)
        entries = [ENTRY] * batch
        for k in range(workers):  # each session's data key made before the clock starts
            await world.append(f"s{k}", entries)

        async def step(k: int) -> int:
            await world.append(f"s{k}", entries)
            return batch

        try:
            return await timed(workers, seconds, step)
        finally:
            await world.close()

    return measure


def read_rate(open_plain: Opener, encrypted: bool, seconds: float):  # type: ignore[no-untyped-def]
    async def measure() -> float:
        world = await _fresh(open_plain, encrypted)
        await world.append("s", [ENTRY] * 100)

        async def step(k: int) -> int:
            return len(await world.read("s", limit=100))

        try:
            return await timed(1, seconds, step)
        finally:
            await world.close()

    return measure


async def cpu_per_append(open_plain: Opener, encrypted: bool, n: int = 2000) -> float:
    world = await _fresh(open_plain, encrypted)
    for _ in range(50):  # warm up, and make the data key
        await world.append("s", [ENTRY])
    before = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(n):
        await world.append("s", [ENTRY])
    after = resource.getrusage(resource.RUSAGE_SELF)
    await world.close()
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) / n


async def first_append(open_plain: Opener, encrypted: bool, n: int = 50) -> float:
    """Milliseconds, median, for the first append of a new session."""
    world = await _fresh(open_plain, encrypted)
    took = []
    for i in range(n):
        t = time.perf_counter()
        await world.append(f"new{i}", [ENTRY])
        took.append(time.perf_counter() - t)
    await world.close()
    return sorted(took)[n // 2] * 1000


async def store(name: str, open_plain: Opener, seconds: float, rounds: int) -> None:
    print(f"{name}: encrypted / plain, median of {rounds} paired rounds of {seconds:g} s")
    rows = [
        ("single appends, 1 task", 1, 1),
        ("single appends, 8 tasks", 8, 1),
        ("batches of 10, 1 task", 1, 10),
    ]
    for label, workers, batch in rows:
        m = await paired(
            rounds,
            append_rate(open_plain, False, workers, batch, seconds),
            append_rate(open_plain, True, workers, batch, seconds),
        )
        print(f"  {label:<28} {m.value:>9,.0f} /s  plain {m.raw:>9,.0f} /s  ratio {m.ratio:.2f}")
    m = await paired(
        rounds, read_rate(open_plain, False, seconds), read_rate(open_plain, True, seconds)
    )
    print(f"  {'entries read (pages of 100)':<28} {m.value:>9,.0f} /s  plain {m.raw:>9,.0f} /s  "
          f"ratio {m.ratio:.2f}")  # fmt: skip
    plain, sealed = await cpu_per_append(open_plain, False), await cpu_per_append(open_plain, True)
    print(f"  {'CPU per single append':<28} {sealed * 1e6:>9,.0f} us plain {plain * 1e6:>9,.0f} us "
          f"ratio {sealed / plain:.2f}")  # fmt: skip
    plain, sealed = await first_append(open_plain, False), await first_append(open_plain, True)
    print(f"  {'first append of a session':<28} {sealed:>9.2f} ms plain {plain:>9.2f} ms "
          f"ratio {sealed / plain:.2f}\n")  # fmt: skip


async def main(args: argparse.Namespace, pg_url: str | None) -> None:
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load:.1f}, Python {sys.version.split()[0]}\n")
    with tempfile.TemporaryDirectory(prefix="fxworld-bench-") as tmp:
        path = Path(tmp) / "world.db"
        await store("SqliteWorld", lambda ns: SqliteWorld(path, namespace=ns), args.seconds,
                    args.rounds)  # fmt: skip
    if pg_url is not None:
        from fxworld_postgres import PostgresWorld

        url = pg_url
        await store("PostgresWorld", lambda ns: PostgresWorld(url, namespace=ns), args.seconds,
                    args.rounds)  # fmt: skip
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure (median)")
    parser.add_argument("--postgres", action="store_true", help="also a throwaway local server")
    parser.add_argument("--url", help="also an existing PostgreSQL server")
    args = parser.parse_args()
    server = None
    pg_url = args.url
    if pg_url is None and args.postgres:
        from tests.support.postgres_server import start_postgres

        server = start_postgres()
        pg_url = server.url
    try:
        asyncio.run(main(args, pg_url))
    finally:
        if server is not None:
            server.stop()
