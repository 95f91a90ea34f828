"""Finding 1 of issue 16: idle streams pinned memory. A stream whose client stops
reading holds one page of the log bounded in bytes, not a backend's page of up
to 1,000 entries: measured on a real ``fxworld serve`` process."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from fxworld import NewEntry, open_world
from fxworld.follow import PAGE_BYTES, bounded_follow
from tests.support.ports import free_port
from tests.web._server import CountingWorld, ServeProcess

pytestmark = pytest.mark.timeout(180)

ENTRY_BYTES = 250 * 1024
ENTRIES = 300  # 75 MB
MiB = 1024 * 1024


def rss(pid: int) -> int:
    """The resident memory of process ``pid``, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def stalled_stream(port: int, path: str) -> socket.socket:
    """A client that asks for a stream and never reads a byte of it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return sock


async def fill(url: str, sid: str) -> None:
    world = open_world(url)
    await world.setup()
    try:
        for start in range(0, ENTRIES, 10):
            await world.append(
                sid,
                [NewEntry("note", {"i": start + k, "pad": "x" * ENTRY_BYTES}) for k in range(10)],
            )
    finally:
        await world.close()


def test_idle_streams_pin_bounded_memory(tmp_path: Path) -> None:
    """Three clients that stop reading a 75 MB session pin under 60 MiB in all."""
    url = f"sqlite:///{tmp_path / 'world.db'}"
    asyncio.run(fill(url, "s-big"))
    server = ServeProcess(
        ["examples/chat/agent.py:agent", "--allow-anyone", "--workers", "0", "--world", url],
        free_port(),
        tmp_path / "serve.log",
    )
    server.start(probe="/sessions/s-probe/stream")
    socks: list[socket.socket] = []
    try:
        assert server.proc is not None
        pid = server.proc.pid
        # One stream read to its end first, so that what every stream needs once
        # (imports, the SQLite connection's cache) is in the baseline.
        warm = stalled_stream(server.port, "/sessions/s-big/stream")
        warm.settimeout(30)
        got = 0
        while got < ENTRIES * ENTRY_BYTES:
            chunk = warm.recv(1 << 20)
            assert chunk
            got += len(chunk)
        warm.close()
        time.sleep(1.0)
        before = rss(pid)
        socks = [stalled_stream(server.port, "/sessions/s-big/stream") for _ in range(3)]
        time.sleep(4.0)  # time for the server to read ahead, if it would
        grown = rss(pid) - before
        print(f"3 stalled streams: RSS {before / MiB:.1f} -> {(before + grown) / MiB:.1f} MiB")
        assert grown < 60 * MiB, f"3 stalled streams pinned {grown / MiB:.1f} MiB"
    except BaseException:
        print(server.output())
        raise
    finally:
        for s in socks:
            s.close()
        server.stop()


async def test_a_stalled_stream_holds_one_page_in_bytes() -> None:
    """The consumer takes one entry and stops: what was read for it stays within
    one page of ``PAGE_BYTES``; the session's own stream does the same."""
    world = CountingWorld()
    for i in range(40):
        await world.append("s-big", [NewEntry("note", {"i": i, "pad": "p" * ENTRY_BYTES})])
    follower: Any = bounded_follow(world, "s-big", 0)
    assert (await anext(follower)).seq == 1
    await asyncio.sleep(0.1)
    assert world.handed_out * ENTRY_BYTES <= PAGE_BYTES + ENTRY_BYTES
    got = [e.seq async for e in _take(follower, 39)]
    assert got == list(range(2, 41))  # and nothing is skipped or repeated
    # Caught up, it follows: one new entry, then a burst, each once and in order.
    pending = asyncio.ensure_future(anext(follower))
    await asyncio.sleep(0.05)
    await world.append("s-big", [NewEntry("note", {"i": 40})])
    assert (await asyncio.wait_for(pending, 5)).seq == 41
    pending = asyncio.ensure_future(anext(follower))
    await asyncio.sleep(0.05)
    await world.append("s-big", [NewEntry("note", {"i": 41 + k}) for k in range(5)])
    assert (await asyncio.wait_for(pending, 5)).seq == 42
    assert [e.seq async for e in _take(follower, 4)] == [43, 44, 45, 46]
    await follower.aclose()


async def _take(it: Any, n: int) -> Any:
    for _ in range(n):
        yield await anext(it)
