"""`fxworld bench [--world URL] [--seconds S]`: how fast is this world?

Measures, for any existing world URL (a SQLite file must exist already: `fxworld
setup` makes one), in a fresh namespace (nothing of yours is touched; the
sessions it writes are deleted afterwards):

- single-entry appends/s and batch appends/s (``--batch`` entries each), and
- reads/s (``--read-size`` entries per read),

from 1 process and from ``--processes`` processes at once (each process on its
own sessions, all in one namespace). A world that is not ``shared`` (memory://)
runs the parallel rows as concurrent tasks in one process instead. Figures are
printed, never asserted; they vary with the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fxworld.cli import add_world_option, plain, url_for, world_url

__all__ = ["register", "Row", "run_bench", "format_table"]

MODES = ("single", "batch", "read")


@dataclass(frozen=True)
class Row:
    """One figure: ``ops`` calls (``entries`` entries) in ``seconds`` by ``workers``."""

    mode: str
    workers: int
    in_processes: bool
    ops: int
    entries: int
    seconds: float

    @property
    def ops_per_second(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0

    @property
    def entries_per_second(self) -> float:
        return self.entries / self.seconds if self.seconds > 0 else 0.0


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "bench",
        help="measure appends/s and reads/s of a world",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_world_option(parser)
    parser.add_argument("--seconds", type=float, default=2.0, help="per figure (default 2)")
    parser.add_argument("--batch", type=int, default=10, help="entries per batch append")
    parser.add_argument("--read-size", type=int, default=100, help="entries per read")
    parser.add_argument(
        "--processes", type=int, default=4, help="processes for the parallel rows (default 4)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)  # worker number
    parser.set_defaults(func=_run)


def _entries(n: int) -> list[Any]:
    from fxworld import NewEntry

    return [NewEntry("bench", {"text": "x" * 64, "i": i}) for i in range(n)]


async def _work(
    world: Any, mode: str, sid: str, until: float, batch: int, read_size: int, total: int
) -> tuple[int, int]:
    """Run one kind of operation until ``until`` (a ``time.time()``), at least once
    (a late start on a loaded machine still gives a figure); (ops, entries)."""
    ops = entries = 0
    if mode == "read":
        cursor = 0
        while ops == 0 or time.time() < until:
            got = await world.read(sid, cursor, limit=read_size)
            ops += 1
            entries += len(got)
            cursor = (cursor + read_size) % max(total - read_size, 1)
        return ops, entries
    size = 1 if mode == "single" else batch
    payload = _entries(size)
    while ops == 0 or time.time() < until:
        await world.append(sid, payload)
        ops += 1
        entries += size
    return ops, entries


async def _measure_in_process(
    url: str, mode: str, workers: int, seconds: float, batch: int, read_size: int, total: int
) -> Row:
    from fxworld import open_world

    world = open_world(url)
    try:
        await world.setup()
        start = time.time() + 0.05
        await asyncio.sleep(0.05)
        results = await asyncio.gather(
            *(
                _work(world, mode, _sid(mode, w), start + seconds, batch, read_size, total)
                for w in range(workers)
            )
        )
        elapsed = time.time() - start
    finally:
        await world.close()
    return Row(
        mode, workers, False, sum(r[0] for r in results), sum(r[1] for r in results), elapsed
    )


class _Children:
    """``n`` child processes on one world, started once and driven mode by mode.

    Each child says ``ready`` once imported and set up; then for each mode name
    written to its stdin it runs that mode for ``seconds`` and answers one JSON
    line. All children get the mode at the same moment.
    """

    def __init__(self, url: str, n: int, seconds: float, batch: int, read_size: int) -> None:
        command = [sys.executable, "-m", "fxworld.cli", "bench", "--world", url]
        command += ["--seconds", str(seconds), "--batch", str(batch)]
        command += ["--read-size", str(read_size)]
        self.procs = [
            subprocess.Popen(
                [*command, "--child", str(w)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for w in range(n)
        ]
        for proc in self.procs:
            self._expect(proc, "ready")

    def run(self, mode: str) -> tuple[int, int, float]:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(mode + "\n")
            proc.stdin.flush()
        ops = entries = 0
        elapsed = 0.0
        for proc in self.procs:
            result = json.loads(self._expect(proc, None))
            ops += result["ops"]
            entries += result["entries"]
            elapsed = max(elapsed, result["seconds"])
        return ops, entries, elapsed

    def close(self) -> None:
        for proc in self.procs:
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _expect(self, proc: subprocess.Popen[str], word: str | None) -> str:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line or (word is not None and line != word):
            proc.kill()
            _, err = proc.communicate(timeout=30)
            raise RuntimeError(f"bench child failed: {(err or line).strip()[-500:]}")
        return line


async def _child(args: argparse.Namespace) -> int:
    from fxworld import open_world

    worker = int(args.child)
    world = open_world(args.world)
    try:
        await world.setup()
        total = len(await world.read(_sid("read", 0), 0, limit=100_000))
        print("ready", flush=True)
        while mode := (await asyncio.to_thread(sys.stdin.readline)).strip():
            began = time.time()
            ops, entries = await _work(
                world,
                mode,
                _sid(mode, worker),
                began + args.seconds,
                args.batch,
                args.read_size,
                total,
            )
            elapsed = time.time() - began
            print(json.dumps({"ops": ops, "entries": entries, "seconds": elapsed}), flush=True)
    finally:
        await world.close()
    return 0


def _sid(mode: str, worker: int) -> str:
    # All readers read one pre-filled session; writers each write their own.
    return "bench-read" if mode == "read" else f"bench-{mode}-{worker}-{os.getpid()}"


async def _fill(url: str, total: int) -> None:
    from fxworld import open_world

    world = open_world(url)
    try:
        await world.setup()
        for _ in range(0, total, 500):
            await world.append(_sid("read", 0), _entries(500))
    finally:
        await world.close()


async def _cleanup(url: str) -> None:
    from fxworld import open_world
    from fxworld.protocol import SessionLister

    world = open_world(url)
    try:
        if isinstance(world, SessionLister):
            while ids := await world.list_sessions(limit=500):
                for sid in ids:
                    await world.delete(sid)
    finally:
        await world.close()


async def run_bench(
    url: str,
    *,
    seconds: float = 2.0,
    batch: int = 10,
    read_size: int = 100,
    processes: Sequence[int] = (1, 4),
) -> list[Row]:
    """Measure ``url`` in a fresh namespace; one :class:`Row` per (mode, workers)."""
    from fxworld import open_world
    from fxworld.urls import with_query

    url = with_query(url, "namespace", "bench_" + uuid.uuid4().hex[:10])
    probe = open_world(url)
    shared = "shared" in probe.capabilities
    await probe.close()
    if shared:
        total = max(read_size * 20, 2000)
        await _fill(url, total)
        rows: list[Row] = []
        try:
            if 1 in processes:
                for mode in MODES:
                    rows.append(
                        await _measure_in_process(url, mode, 1, seconds, batch, read_size, total)
                    )
            for n in processes:
                if n == 1:
                    continue
                children = await asyncio.to_thread(_Children, url, n, seconds, batch, read_size)
                try:
                    for mode in MODES:
                        ops, entries, elapsed = await asyncio.to_thread(children.run, mode)
                        rows.append(Row(mode, n, True, ops, entries, elapsed))
                finally:
                    await asyncio.to_thread(children.close)
        finally:
            await _cleanup(url)
        return sorted(rows, key=lambda r: (MODES.index(r.mode), r.workers))
    # Not shared (memory://): one world object, parallel rows as concurrent tasks.
    return await _bench_one_world(url, seconds, batch, read_size, processes)


async def _bench_one_world(
    url: str, seconds: float, batch: int, read_size: int, processes: Sequence[int]
) -> list[Row]:
    from fxworld import open_world

    world = open_world(url)
    await world.setup()
    total = max(read_size * 20, 2000)
    try:
        for _ in range(0, total, 500):
            await world.append(_sid("read", 0), _entries(500))
        rows = []
        for mode in MODES:
            for workers in processes:
                start = time.time()
                results = await asyncio.gather(
                    *(
                        _work(world, mode, _sid(mode, w), start + seconds, batch, read_size, total)
                        for w in range(workers)
                    )
                )
                rows.append(
                    Row(
                        mode,
                        workers,
                        False,
                        sum(r[0] for r in results),
                        sum(r[1] for r in results),
                        time.time() - start,
                    )
                )
        return rows
    finally:
        await world.close()


def format_table(rows: Sequence[Row], *, batch: int = 10, read_size: int = 100) -> str:
    names = {
        "single": "single-entry append",
        "batch": f"batch append ({batch} entries)",
        "read": f"read ({read_size} entries)",
    }
    lines = [f"{'operation':<28}  {'workers':>12}  {'calls/s':>10}  {'entries/s':>10}"]
    for row in rows:
        who = f"{row.workers} {'process' if row.in_processes or row.workers == 1 else 'task'}"
        if row.workers != 1:
            who += "es" if row.in_processes else "s"
        lines.append(
            f"{names[row.mode]:<28}  {who:>12}  {row.ops_per_second:>10,.0f}"
            f"  {row.entries_per_second:>10,.0f}"
        )
    return "\n".join(lines)


async def _run(args: argparse.Namespace) -> int:
    from fxworld import open_world
    from fxworld.errors import InvalidArgument
    from fxworld.urls import mask

    if args.child:
        return await _child(args)
    if args.seconds <= 0 or args.batch < 1 or args.read_size < 1 or args.processes < 1:
        raise InvalidArgument("--seconds, --batch, --read-size and --processes must be positive")
    processes = sorted({1, args.processes})
    url = url_for(args, "write")  # an existing world: a SQLite file is never created
    await open_world(url).close()  # a bad URL or a missing extra: one line, before the header
    print(
        f"fxworld bench: {mask(world_url(args))}, {args.seconds:g} s per figure, "
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}",
        flush=True,
    )
    rows = await run_bench(
        url,
        seconds=args.seconds,
        batch=args.batch,
        read_size=args.read_size,
        processes=processes,
    )
    print(format_table(rows, batch=args.batch, read_size=args.read_size))
    return 0
