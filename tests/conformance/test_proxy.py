"""The kit's TCP proxy: it forwards, cuts both sides, refuses, and stalls."""

from __future__ import annotations

import asyncio
import time

import pytest

from fxworld_conformance.procs.proxy import TcpProxy, proxied_url, upstream_of


async def echo_server() -> tuple[asyncio.Server, int]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(1024):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def roundtrip(port: int, payload: bytes = b"ping") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(payload)
        await writer.drain()
        return await asyncio.wait_for(reader.readexactly(len(payload)), 5)
    finally:
        writer.close()


async def test_proxy_forwards_cuts_refuses_and_stalls() -> None:
    server, port = await echo_server()
    proxy = TcpProxy("127.0.0.1", port)
    listen = await proxy.start()
    try:
        assert await roundtrip(listen) == b"ping"

        # cut: an open connection is aborted on both sides
        reader, writer = await asyncio.open_connection("127.0.0.1", listen)
        writer.write(b"a")
        assert await asyncio.wait_for(reader.readexactly(1), 5) == b"a"
        assert proxy.cut() == 1
        with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
            writer.write(b"b")
            await writer.drain()
            await asyncio.wait_for(reader.readexactly(1), 5)
        writer.close()

        # refuse: new connections are dropped for a while, then accepted again
        proxy.cut(refuse_for=1.0)
        with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
            await roundtrip(listen)
        await asyncio.sleep(1.1)
        assert await roundtrip(listen) == b"ping"

        # stall: bytes are held back, then delivered
        proxy.stall(0.4)
        began = time.monotonic()
        assert await roundtrip(listen, b"late") == b"late"
        assert time.monotonic() - began >= 0.3
    finally:
        await proxy.close()
        server.close()
        await server.wait_closed()


def test_proxied_url_keeps_credentials_path_and_query() -> None:
    url = "postgresql://user:pw@db.internal:5432/app?namespace=fxk_1&sslmode=disable"
    assert upstream_of(url) == ("db.internal", 5432)
    assert proxied_url(url, 40001) == (
        "postgresql://user:pw@127.0.0.1:40001/app?namespace=fxk_1&sslmode=disable"
    )
    s3 = "s3://bucket/prefix?endpoint_url=http://127.0.0.1:9000&namespace=n"
    assert upstream_of(s3) == ("127.0.0.1", 9000)
    assert "endpoint_url=http%3A%2F%2F127.0.0.1%3A40002" in proxied_url(s3, 40002)
    assert upstream_of("sqlite:////tmp/w.db?namespace=n") is None
    assert upstream_of("memory://") is None
    assert upstream_of("redis://localhost/0") is None  # no explicit port: nothing to proxy
