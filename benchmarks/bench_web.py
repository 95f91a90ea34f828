"""Figures for the HTTP routes: SSE replay throughput and live delivery latency.

Runs uvicorn in this process on a fresh SQLite world (or ``--world URL``) and a
real HTTP client (httpx) over loopback::

    python benchmarks/bench_web.py [--entries 5000] [--live 50] [--world URL]
                                   [--idle-streams 3] [--idle-entries 120]

Prints: how fast a stream replays a long log (events/s, MB/s of SSE), how long
an entry takes from ``append`` returning to its event arriving on an open
stream (median and p95), and the memory an idle stream pins: clients that ask
for a session of ``--idle-entries`` entries of 250 KiB and never read a byte
(the process's RSS growth divided by the streams, beside the session's size).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import uvicorn

from fxworld import Agent, NewEntry, open_world
from fxworld.testing import ScriptedModel
from fxworld.web import create_app


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--live", type=int, default=50)
    parser.add_argument("--world", default=None)
    parser.add_argument("--idle-streams", type=int, default=3)
    parser.add_argument("--idle-entries", type=int, default=120)
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="fxworld-bench-web-")
    world = open_world(args.world or f"sqlite:///{Path(tmp) / 'world.db'}")
    await world.setup()
    agent = Agent(ScriptedModel(["x"]), world=world)
    app = create_app(agent, allow_anyone=True)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()  # it failed to start: say why
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    base = f"http://127.0.0.1:{port}"

    sid = "s-bench-replay"
    pad = "x" * 200
    for start in range(0, args.entries, 100):
        n = min(100, args.entries - start)
        await world.append(sid, [NewEntry("text", {"i": start + k, "text": pad}) for k in range(n)])

    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        got = 0
        size = 0
        began = time.perf_counter()
        async with client.stream("GET", f"/sessions/{sid}/stream") as r:
            async for line in r.aiter_lines():
                size += len(line) + 1
                if line.startswith("event: "):
                    got += 1
                    if got == args.entries:
                        break
        replay = time.perf_counter() - began

        live_sid = "s-bench-live"
        await world.append(live_sid, [NewEntry("note", {"i": -1})])
        delays: list[float] = []
        async with client.stream("GET", f"/sessions/{live_sid}/stream") as r:
            lines = r.aiter_lines()
            while await anext(lines) != "event: note":
                pass
            for i in range(args.live):
                await world.append(live_sid, [NewEntry("note", {"i": i})])
                appended = time.perf_counter()
                while await anext(lines) != "event: note":
                    pass
                delays.append(time.perf_counter() - appended)
                await asyncio.sleep(0.01)

    idle_sid = "s-bench-idle"
    big = "x" * IDLE_ENTRY_BYTES
    for start in range(0, args.idle_entries, 10):
        n = min(10, args.idle_entries - start)
        await world.append(
            idle_sid, [NewEntry("note", {"i": start + k, "pad": big}) for k in range(n)]
        )
    per_stream = await idle_stream_memory(port, f"/sessions/{idle_sid}/stream", args.idle_streams)

    server.should_exit = True
    app.state.close_streams()
    await serving
    await world.close()

    delays.sort()
    p95 = delays[max(0, int(len(delays) * 0.95) - 1)]
    print(f"world: {type(world).__name__}")
    print(f"{'measure':<42}{'value':>14}")
    print(f"{'SSE replay of ' + str(args.entries) + ' entries (s)':<42}{replay:>14.3f}")
    print(f"{'  events/s':<42}{args.entries / replay:>14.0f}")
    print(f"{'  MB/s of SSE':<42}{size / replay / 1e6:>14.2f}")
    print(f"{'live append -> event, median (ms)':<42}{statistics.median(delays) * 1000:>14.1f}")
    print(f"{'live append -> event, p95 (ms)':<42}{p95 * 1000:>14.1f}")
    size = args.idle_entries * IDLE_ENTRY_BYTES / MiB
    print(f"{'idle stream of a ' + f'{size:.0f} MiB session':<42}")
    print(f"{'  RSS pinned per idle stream (MiB)':<42}{per_stream / MiB:>14.1f}")
    print(f"{'  ratio to the session size':<42}{per_stream / MiB / size:>14.3f}")


IDLE_ENTRY_BYTES = 250 * 1024
MiB = 1024 * 1024


def rss() -> int:
    """This process's resident memory, in bytes (Linux)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def idle_stream_memory(port: int, path: str, streams: int) -> float:
    """RSS growth per stream while ``streams`` clients ask for ``path`` and never
    read, after one client has read it to its end (the shared caches are warm)."""
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    while b"event: note" not in await reader.read(1 << 20):
        pass
    while True:  # read the whole replay; the stream then idles on heartbeats
        try:
            await asyncio.wait_for(reader.read(1 << 20), 1.0)
        except TimeoutError:
            break
    writer.close()
    await asyncio.sleep(0.5)
    before = rss()
    socks = []
    for _ in range(streams):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        sock.send(request)
        socks.append(sock)
    await asyncio.sleep(3.0)  # time for the server to read ahead, if it would
    grown = rss() - before
    for sock in socks:
        sock.close()
    return max(grown, 0) / streams


if __name__ == "__main__":
    asyncio.run(main())
