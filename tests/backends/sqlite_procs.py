"""Child processes for the SQLite multi-process tests.

Run as ``python -m tests.backends.sqlite_procs ROLE DB_PATH NAME SECONDS RECORD``.
Every operation is recorded to the JSON-lines file RECORD *before* it starts
(``try``) and after it returns (``ok`` with its seq, ``fenced``, ``unavailable``),
each line handed to the OS at once, so a SIGKILL leaves at most one operation
without an outcome: an indeterminate one.

Roles:
- ``fenced``: again and again, acquire the shared session and append up to three
  fenced batches of 1..4 entries until refused.
- ``prompts``: append single keyed prompts, unfenced, with ``wake=0``.
- ``wakeloop``: append one large batch with ``wake=0`` to a new session each time
  (for the SIGKILL-during-append check).
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from typing import Any, TextIO

from fxworld import NewEntry, SqliteWorld
from fxworld.errors import BackendUnavailable, Fenced

SHARED = "shared"
WAKE_BATCH = 100


def note(out: TextIO, **record: Any) -> None:
    out.write(json.dumps(record) + "\n")  # line-buffered: one write(2) per record


async def fenced(world: SqliteWorld, name: str, deadline: float, out: TextIO) -> None:
    n = 0
    while time.monotonic() < deadline:
        fence = await world.acquire(SHARED)
        note(out, op="acquire", epoch=fence.epoch, seq=fence.seq)
        for _ in range(3):
            n += 1
            op_id = f"{name}-{n}"
            size = random.randint(1, 4)
            note(out, op="try", id=op_id, size=size, epoch=fence.epoch)
            batch = [NewEntry("step", {"id": op_id, "i": i}) for i in range(size)]
            try:
                seq = await world.append(SHARED, batch, fence=fence)
            except Fenced:
                note(out, op="fenced", id=op_id)
                break
            except BackendUnavailable:
                note(out, op="unavailable", id=op_id)
                break
            note(out, op="ok", id=op_id, seq=seq)
            await asyncio.sleep(random.uniform(0, 0.004))


async def prompts(world: SqliteWorld, name: str, deadline: float, out: TextIO) -> None:
    n = 0
    while time.monotonic() < deadline:
        n += 1
        op_id = f"{name}-{n}"
        note(out, op="try", id=op_id, size=1, epoch=None)
        try:
            seq = await world.append(
                SHARED, [NewEntry("prompt", {"id": op_id, "i": 0})], key=op_id, wake=0
            )
        except BackendUnavailable:
            note(out, op="unavailable", id=op_id)
            continue
        note(out, op="ok", id=op_id, seq=seq)
        await asyncio.sleep(random.uniform(0, 0.004))


async def wakeloop(world: SqliteWorld, name: str, deadline: float, out: TextIO) -> None:
    filler = "x" * 2000
    n = 0
    while time.monotonic() < deadline:
        n += 1
        sid = f"{name}-{n}"
        note(out, op="try", id=sid, size=WAKE_BATCH, epoch=None)
        batch = [NewEntry("chunk", {"id": sid, "i": i, "pad": filler}) for i in range(WAKE_BATCH)]
        seq = await world.append(sid, batch, key=sid, wake=0)
        note(out, op="ok", id=sid, seq=seq)


ROLES = {"fenced": fenced, "prompts": prompts, "wakeloop": wakeloop}


async def main(role: str, path: str, name: str, seconds: float, out: TextIO) -> None:
    world = SqliteWorld(path)
    await world.setup()
    note(out, op="start")
    await ROLES[role](world, name, time.monotonic() + seconds, out)
    note(out, op="done")
    await world.close()


if __name__ == "__main__":
    role, path, name, seconds, record = sys.argv[1:6]
    with open(record, "a", buffering=1, encoding="utf-8") as out:
        asyncio.run(main(role, path, name, float(seconds), out))
