"""Figures for the approval list on a long session: latency and server memory.

Builds (once) a SQLite session of ``--entries`` entries: finished turns of
``--turn`` entries each (a prompt, ``turn.started``, text chunks, the
``message``, ``turn.finished``), then a turn parked on one call that waits for
approval. Serves it with uvicorn in a child process and asks
``GET /sessions/{id}/approvals`` once, then ``--concurrent`` times at once::

    python benchmarks/bench_approvals.py [--entries 100000] [--turn 44]
                                         [--concurrent 8] [--db PATH]

Prints the latency of one request (median of 5), the wall time of the
concurrent burst, and the server's RSS before and after (from /proc).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from fxworld import NewEntry, SqliteWorld
from fxworld.engine import log

SID = "s-bench-approvals"
_SERVER = """
import sys, uvicorn
from fxworld import Agent, SqliteWorld, tool
from fxworld.testing import ScriptedModel
from fxworld.web import create_app

@tool(needs_approval=True)
def refund(order_id: str) -> str:
    "Refund an order."
    return "ok"

agent = Agent(ScriptedModel(["x"]), tools=[refund], world=SqliteWorld(sys.argv[1]))
uvicorn.run(create_app(agent, allow_anyone=True), host="127.0.0.1", port=int(sys.argv[2]),
            log_level="warning", lifespan="off")
"""


def _turn(prompt: int, n: int, t: int) -> list[NewEntry]:
    """A finished turn of ``n`` entries answering a prompt that lands at ``prompt``."""
    chunks = [log.entry(log.TEXT, call=f"c{t}", text="word " * 20) for _ in range(max(0, n - 4))]
    return [
        log.entry(log.PROMPT, text=f"question {t}", key=f"k{t}"),
        log.entry(log.TURN_STARTED, prompt=prompt, turn=f"t{t}"),
        *chunks,
        log.entry(log.MESSAGE, call=f"c{t}", model="m", text="...", tool_calls=[], usage=None),
        log.entry(log.TURN_FINISHED, prompt=prompt, turn=f"t{t}", text="..."),
    ]


def _parked(prompt: int) -> list[NewEntry]:
    """A turn whose one call waits for approval."""
    xid, call = "x-waiting", {"order_id": "A-1"}
    calls = [{"id": "call-1", "name": "refund", "input": call, "execution_id": xid}]
    return [
        log.entry(log.PROMPT, text="refund A-1", key="last"),
        log.entry(log.TURN_STARTED, prompt=prompt, turn="last"),
        log.entry(log.MESSAGE, call="cl", model="m", text="", tool_calls=calls, usage=None),
        log.entry(
            log.APPROVAL_REQUESTED,
            execution_id=xid,
            call_id="call-1",
            name="refund",
            input=call,
            timeout=None,
            expires_at=None,
        ),
    ]


async def build(db: Path, entries: int, turn: int) -> None:
    world = SqliteWorld(db)
    await world.setup()
    try:
        if await world.read(SID, 0, limit=1):
            return  # built by an earlier run
        seq, t = 0, 0
        while seq + turn + 4 <= entries:
            seq = await world.append(SID, _turn(seq + 1, turn, t))
            t += 1
        await world.append(SID, _parked(seq + 1))
    finally:
        await world.close()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--turn", type=int, default=44)
    parser.add_argument("--concurrent", type=int, default=8)
    parser.add_argument("--db", type=Path, default=None)
    args = parser.parse_args()
    db = args.db or Path(tempfile.mkdtemp(prefix="fxworld-bench-approvals-")) / "world.db"
    await build(db, args.entries, args.turn)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = await asyncio.create_subprocess_exec(sys.executable, "-c", _SERVER, str(db), str(port))
    base = f"http://127.0.0.1:{port}"
    url = f"/sessions/{SID}/approvals"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=120) as client:
            for _ in range(200):
                try:
                    await client.get("/nothing")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.05)
            before = rss_mb(server.pid)
            one: list[float] = []
            for _ in range(5):
                began = time.perf_counter()
                r = await client.get(url)
                one.append(time.perf_counter() - began)
                assert r.status_code == 200 and len(r.json()["approvals"]) == 1, r.text
            after_one = rss_mb(server.pid)
            began = time.perf_counter()
            rs = await asyncio.gather(*(client.get(url) for _ in range(args.concurrent)))
            burst = time.perf_counter() - began
            assert all(r.status_code == 200 for r in rs)
            after = rss_mb(server.pid)
    finally:
        server.terminate()
        await server.wait()
    print(f"session: {args.entries} entries ({args.turn} per turn), SQLite at {db}")
    print(f"one request:  median {statistics.median(one) * 1000:.1f} ms (of 5)")
    print(f"{args.concurrent} at once:    {burst * 1000:.1f} ms for all")
    print(
        f"server RSS:   {before:.0f} MB at start, {after_one:.0f} MB after 5 single requests,"
        f" {after:.0f} MB after the burst (+{after - before:.0f} MB)"
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    asyncio.run(main())
