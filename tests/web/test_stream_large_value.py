"""A large value reaches an HTTP stream's client whole: a 32 MiB entry streamed by a
real ``fxworld serve`` process arrives as one event holding all of it
(docs/large-values.md)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from fxworld import NewEntry, open_world
from tests.support.ports import free_port
from tests.web._server import ServeProcess

pytestmark = pytest.mark.timeout(180)

BIG = 32 * 1024 * 1024
VALUE = ("0123456789abcdef" * (BIG // 16))[: BIG - 64]


async def fill(url: str) -> None:
    world = open_world(url)
    await world.setup()
    try:
        entries = [NewEntry("note", {"pad": VALUE}), NewEntry("note", {"end": 1})]
        await world.append("s-big", entries)
    finally:
        await world.close()


def holds(payload: Any, text: str) -> bool:
    """Whether ``text`` is one of the strings in ``payload`` (a parsed JSON value)."""
    if isinstance(payload, str):
        return payload == text
    if isinstance(payload, dict):
        return any(holds(v, text) for v in payload.values())
    if isinstance(payload, list):
        return any(holds(v, text) for v in payload)
    return False


def test_a_32_mib_value_reaches_the_http_streams_client_whole(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'world.db'}"
    asyncio.run(fill(url))
    server = ServeProcess(
        ["examples/chat/agent.py:agent", "--allow-anyone", "--workers", "0", "--world", url],
        free_port(),
        tmp_path / "serve.log",
    )
    server.start(probe="/sessions/s-probe/stream")
    try:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        sock.sendall(b"GET /sessions/s-big/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        got = bytearray()
        while b'"end"' not in got[-4096:]:
            chunk = sock.recv(1 << 20)
            assert chunk, "the stream ended before the last entry"
            got += chunk
        sock.close()
    finally:
        server.stop()
    datas = [line[6:] for line in bytes(got).split(b"\n") if line.startswith(b"data: ")]
    events = [json.loads(d) for d in datas if len(d) > BIG // 2]
    assert len(events) == 1 and holds(events[0], VALUE)
