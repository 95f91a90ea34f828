"""Profile an awaitable's own CPU time with cProfile, in this thread and in the threads
started meanwhile (SqliteWorld's calls run in a thread of its own), and print it:
the functions with the most own time, those with the most cumulative time, and own
time by kind (encoding/JSON, replay, object churn, asyncio tasks, the event loop,
the driver, logging, validation, the engine's other code, the world's code).

    from _profile import Profiler
    profiler = Profiler()          # before the world starts its threads
    run = await prepare()
    await profiler.run(run())
    profiler.report(steps=800, top=15)
"""

from __future__ import annotations

import cProfile
import pstats
import threading
import time
from collections.abc import Awaitable
from typing import Any

Key = tuple[str, int, str]  # (file, line, function), as pstats names a function

KINDS: list[tuple[str, tuple[str, ...]]] = [
    ("logging", ("logging/",)),
    ("validation", ("fxworld/validate.py:session_id", "fxworld/validate.py:append_args",
                    "fxworld/validate.py:entries", "fxworld/validate.py:held",
                    "fxworld/validate.py:read_args", "fxworld/validate.py:lease",
                    "fxworld/validate.py:delay", "fxworld/validate.py:_is", "re.Pattern")),
    ("encoding/JSON", ("json/", "_json", "validate.py:", "Jsonb", "orjson", "ormsgpack",
                       "serde", "encode", "decode", "dumps", "loads")),
    ("replay", ("engine/replay.py",)),
    ("asyncio task creation", ("create_task", "tasks.py:__init__", "Task", "ensure_future",
                               "gather", "_GatheringFuture", "TaskGroup", "taskgroups.py",
                               "_weakrefset.py")),
    ("driver", ("asyncpg", "sqlite3", "sqlalchemy", "psycopg", "redis/", "botocore")),
    ("socket I/O", ("_socket.socket", "sock_", "transports")),
    ("event loop", ("asyncio/", "selectors.py", "select.epoll", "_contextvars", "Future",
                    "collections.deque")),
    ("ids and tokens", ("uuid", "urandom", "secrets", "random")),
    ("object churn", ("dataclasses.py", "copy.py", "<string>:__init__", ":__init__",
                      ":__new__", "<genexpr>", "<listcomp>", "<dictcomp>", "datetime")),
    ("engine (other)", ("fxworld/engine/", "fxworld/models/", "fxworld/testing.py")),
    ("world (fxworld's)", ("fxworld_postgres/", "fxworld_redis/", "fxworld_s3/",
                           "fxworld/embedded/", "fxworld/follow.py", "fxworld/wakes.py")),
]  # fmt: skip
"""Kinds of own time, the first match wins: a pattern is matched against
``file:function`` (``~`` is the file of a built-in)."""


def kind(key: Key) -> str:
    """The kind of a function's own time (see :data:`KINDS`), or ``other``."""
    file, _, func = key
    name = f"{file.replace(chr(92), '/')}:{func}"
    for label, patterns in KINDS:
        if any(p in name for p in patterns):
            return label
    return "other"


class Profiler:
    """Own CPU time (``time.thread_time``) per function, in this thread and in every
    thread started after the profiler was made (``threading.setprofile``: a new
    thread's first profiling event enables a profile of its own), so make it before
    the world that starts a thread."""

    def __init__(self) -> None:
        self.main = cProfile.Profile(time.thread_time)
        self.threads: list[tuple[threading.Thread, cProfile.Profile]] = []
        threading.setprofile(self._thread)

    def _thread(self, *_: Any) -> None:
        prof = cProfile.Profile(time.thread_time)
        self.threads.append((threading.current_thread(), prof))
        prof.enable()  # replaces this hook in the new thread

    async def run(self, aw: Awaitable[Any]) -> None:
        """Await ``aw`` with this thread profiled; threads stay profiled until it ends."""
        self.main.enable()
        try:
            await aw
        finally:
            self.main.disable()
            threading.setprofile(None)  # type: ignore[arg-type]

    def report(self, *, steps: int, top: int = 15) -> None:
        """Print the profile; ``steps`` (the tool steps run) makes figures per step.
        Waits for the threads to end first (a world's ``close`` stops its thread): a
        profile read while its thread still runs charges the open calls with this
        thread's clock."""
        stats = pstats.Stats(self.main)
        for thread, prof in self.threads:
            thread.join(timeout=10)
            if not thread.is_alive():
                stats.add(prof)
        report(stats, steps=steps, top=top, threads=len(self.threads))


def report(stats: pstats.Stats, *, steps: int, top: int, threads: int) -> None:
    rows: dict[Key, tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    total = sum(r[2] for r in rows.values()) or 1e-9
    where = f"this thread and {threads} more" if threads else "this thread"
    print(f"\nprofiled ({where}): {total:.3f} s of CPU in all, "
          f"{total / steps * 1000:.3f} ms per tool step (cProfile slows it down)")  # fmt: skip
    for title, col in (("own time (tottime)", 2), ("cumulative time", 3)):
        print(f"\ntop {top} by {title}:")
        print(f"{'share':>6} {'ms/step':>8} {'calls/step':>10}  function")
        for key, r in sorted(rows.items(), key=lambda kv: -kv[1][col])[:top]:
            print(f"{r[col] / total:>6.1%} {r[col] / steps * 1000:>8.3f} "
                  f"{r[1] / steps:>10.1f}  {_name(key)}  [{kind(key)}]")  # fmt: skip
    kinds: dict[str, float] = {}
    for key, r in rows.items():
        kinds[kind(key)] = kinds.get(kind(key), 0.0) + r[2]
    print("\nown time by kind:")
    for label, t in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"{t / total:>6.1%} {t / steps * 1000:>8.3f} ms/step  {label}")
    other = sorted((r[2], key) for key, r in rows.items() if kind(key) == "other")[::-1]
    print("  of which other: " + ", ".join(f"{_name(k)} {t / total:.1%}" for t, k in other[:8]))


def _name(key: Key) -> str:
    file, line, func = key
    if file == "~":
        return func
    parts = file.replace("\\", "/").split("/")
    return f"{'/'.join(parts[-2:])}:{line}({func})"
