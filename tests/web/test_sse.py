"""SSE framing and the heartbeat merger, on their own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from fxworld.web import _sse


def test_a_frame_is_one_event_whatever_its_values_hold() -> None:
    raw = _sse.frame("3.ab", "evil\nid: 999\r\ndata: x", {"text": "two\nlines\r\n", "n": 1})
    text = raw.decode()
    assert text.endswith("\n\n") and text.count("\n\n") == 1
    lines = text[:-2].split("\n")
    assert [line.split(":", 1)[0] for line in lines] == ["id", "event", "data"]
    assert lines[0] == "id: 3.ab"
    assert json.loads(lines[2][len("data: ") :]) == {"text": "two\nlines\r\n", "n": 1}


async def test_heartbeats_fill_silence_and_never_read_ahead() -> None:
    pulled = 0
    gate = asyncio.Event()
    closed = False

    async def source() -> AsyncIterator[bytes]:
        nonlocal pulled, closed
        try:
            for i in range(3):
                if i == 1:
                    await gate.wait()  # a quiet log
                pulled += 1
                yield f"e{i}".encode()
        finally:
            closed = True

    out = _sse.heartbeats(source(), every=0.05)
    assert await anext(out) == b"e0"
    assert await anext(out) == _sse.comment("heartbeat")
    assert await anext(out) == _sse.comment("heartbeat")
    assert pulled == 1  # the pending pull is the only one, heartbeats start no other
    gate.set()
    assert await anext(out) == b"e1"
    await out.aclose()  # the client went away
    assert closed
    assert pulled == 2
