"""A TCP proxy in front of a test server that counts what the client sends, for
the tests that a World call costs one round trip (or one command). A subclass
says what one counted unit is: :meth:`CountingProxy._forward` reads the client's
byte stream message by message, adds to ``count``, and writes each message on."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Self


class CountingProxy:
    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.count = 0
        self.port = 0
        self._srv: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Self:
        self._srv = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._srv.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._srv is not None
        self._srv.close()
        for t in list(self._tasks):
            t.cancel()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection(*self.upstream)
        for coro in (self._counting(reader, up_w), self._pipe(up_r, writer)):
            task = asyncio.create_task(coro)
            self._tasks.add(task)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _counting(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            await self._forward(reader, writer)
        writer.close()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError
