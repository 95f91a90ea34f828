"""A small asyncio TCP proxy that cuts and stalls connections on command.

The process tier points the world's URL at the proxy (:func:`proxied_url`) so that
it can cut every open connection (both sides aborted, as a crashed network or a
killed load balancer would), refuse new ones for a while, or stall them (bytes held
back in both directions) while the racing processes keep working.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["TcpProxy", "proxied_url", "upstream_of"]


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``host:port`` until told otherwise."""

    def __init__(self, host: str, port: int, *, listen: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port
        self.listen = listen
        self.listen_port = 0
        self._server: asyncio.Server | None = None
        self._links: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._refuse_until = 0.0
        self._stalled_until = 0.0
        self._tasks: set[asyncio.Task[None]] = set()
        self.cuts = 0
        self.stalls = 0

    async def start(self) -> int:
        """Start listening; return the port."""
        self._server = await asyncio.start_server(self._accept, self.listen, 0)
        self.listen_port = self._server.sockets[0].getsockname()[1]
        return self.listen_port

    async def close(self) -> None:
        """Stop listening and drop every connection."""
        if self._server is not None:
            self._server.close()
            self._server = None
        self._flowing.set()
        self.cut()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    def cut(self, *, refuse_for: float = 0.0) -> int:
        """Abort every open connection, both sides; refuse new ones for
        ``refuse_for`` seconds. Returns how many connections were cut."""
        self._refuse_until = max(self._refuse_until, _now() + refuse_for)
        links = list(self._links)
        self._links.clear()
        for client, upstream in links:
            for w in (client, upstream):
                with contextlib.suppress(Exception):
                    w.transport.abort()
        self.cuts += 1
        return len(links)

    def stall(self, seconds: float) -> None:
        """Hold every byte in both directions for ``seconds``, then let it flow."""
        self.stalls += 1
        self._stalled_until = max(self._stalled_until, _now() + seconds)
        self._flowing.clear()
        asyncio.get_running_loop().call_later(seconds, self._resume)

    def _resume(self) -> None:
        if _now() >= self._stalled_until - 0.001:
            self._flowing.set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if _now() < self._refuse_until:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            writer.transport.abort()
            return
        link = (writer, up_writer)
        self._links.add(link)
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(src, dst, link))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(
        self,
        src: asyncio.StreamReader,
        dst: asyncio.StreamWriter,
        link: tuple[asyncio.StreamWriter, asyncio.StreamWriter],
    ) -> None:
        try:
            while True:
                data = await src.read(65536)
                if not data:
                    break
                await self._flowing.wait()
                if link not in self._links:
                    break
                dst.write(data)
                await dst.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            if link in self._links:
                self._links.discard(link)
                for w in link:
                    with contextlib.suppress(Exception):
                        w.close()


def _now() -> float:
    return asyncio.get_running_loop().time()


def upstream_of(url: str) -> tuple[str, int] | None:
    """The ``(host, port)`` a world URL connects to over TCP, if it names one: the
    URL's own ``host:port``, or that of an ``endpoint_url`` query parameter."""
    parts = urlsplit(url)
    try:
        if parts.hostname and parts.port:
            return parts.hostname, parts.port
        for key, value in parse_qsl(parts.query):
            if key == "endpoint_url":
                inner = urlsplit(value)
                if inner.hostname and inner.port:
                    return inner.hostname, inner.port
    except ValueError:
        return None
    return None


def proxied_url(url: str, port: int, host: str = "127.0.0.1") -> str:
    """``url`` with the ``host:port`` that :func:`upstream_of` found replaced by the
    proxy's ``host:port`` (credentials and everything else kept)."""
    parts = urlsplit(url)
    if parts.hostname and parts.port:
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = (userinfo + "@" if userinfo else "") + f"{host}:{port}"
        return urlunsplit(parts._replace(netloc=netloc))
    query = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "endpoint_url":
            inner = urlsplit(value)
            if inner.hostname and inner.port:
                userinfo = inner.netloc.rpartition("@")[0]
                netloc = (userinfo + "@" if userinfo else "") + f"{host}:{port}"
                value = urlunsplit(inner._replace(netloc=netloc))
        query.append((key, value))
    return urlunsplit(parts._replace(query=urlencode(query)))
