"""What benchmarks/bench_fleet.py asks the store: connections in use and the
server's CPU, each from the server itself; and the throwaway servers it
starts for ``--world sqlite|postgres|pgbouncer|redis|redis-cluster``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

__all__ = ["Probe", "open_probe", "cpu_seconds"]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Probe:
    """No server (SQLite): nothing to count."""

    processes = 0  # the server's processes busy at once here, for the fair share

    async def connections(self) -> int:
        return 0

    async def server_pids(self) -> list[int]:
        return []

    async def close(self) -> None:
        pass


class PostgresProbe(Probe):
    """``pg_stat_activity`` on a direct connection; the CPU
    of the database's backends (and of ``extra_pids``, PgBouncer's) that run here."""

    def __init__(self, conn: Any, extra_pids: list[int]) -> None:
        self.conn = conn
        self.extra = extra_pids
        self.processes = 1 + len(extra_pids)
        self.lock = asyncio.Lock()  # one query at a time on the connection

    async def connections(self) -> int:
        async with self.lock:
            return int(
                await self.conn.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                    "AND datname = current_database() AND pid <> pg_backend_pid()"
                )
            )

    async def server_pids(self) -> list[int]:
        """The database's client backends now (not this probe's), and PgBouncer's."""
        async with self.lock:
            pids = await self.conn.fetch(
                "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' "
                "AND pid <> pg_backend_pid()"
            )
        return [pid for (pid,) in pids] + self.extra

    async def close(self) -> None:
        await self.conn.close()


class RedisProbe(Probe):
    """``CLIENT LIST`` and ``INFO`` on every node (one server, or each primary)."""

    def __init__(self, nodes: list[Any]) -> None:
        self.nodes = nodes
        self.processes = len(nodes)
        self.pids: list[int] = []

    async def connections(self) -> int:
        total = 0
        for n in self.nodes:
            total += len(await n.client_list()) - 1
        return total

    async def server_pids(self) -> list[int]:
        if not self.pids:
            self.pids = [int((await n.info("server"))["process_id"]) for n in self.nodes]
        return self.pids

    async def close(self) -> None:
        for n in self.nodes:
            await n.aclose()


async def postgres_probe(url: str, extra_pids: list[int]) -> Probe:
    import asyncpg

    return PostgresProbe(await asyncpg.connect(url.split("?")[0]), extra_pids)


async def redis_probe(url: str) -> Probe:
    import redis.asyncio as redis

    first = redis.Redis.from_url(url.split("?")[0])
    if "cluster=true" not in url:
        return RedisProbe([first])
    nodes = []
    for addr, node in (await first.execute_command("CLUSTER NODES")).items():  # addr -> flags
        if "master" in node["flags"]:
            host, port = addr.split("@")[0].rsplit(":", 1)
            nodes.append(redis.Redis(host=host, port=int(port)))
    await first.aclose()
    return RedisProbe(nodes)


MakeProbe = Callable[[], Awaitable[Probe]]


@contextlib.contextmanager
def open_probe(world: str) -> Iterator[tuple[str, MakeProbe]]:
    """The world's base URL and how to probe its server; a throwaway server for the
    names of the module docstring, stopped on exit."""
    if world == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{tmp}/fleet.db", _no_probe
        return
    if world in ("postgres", "pgbouncer"):
        with _postgres(world == "pgbouncer") as found:
            yield found
        return
    if world in ("redis", "redis-cluster"):
        from tests.support.redis_server import start_cluster, start_redis

        server = start_cluster() if world == "redis-cluster" else start_redis()
        try:
            yield server.url, lambda: redis_probe(server.url)
        finally:
            server.stop()
        return
    if world.startswith(("postgres", "redis")):
        probe = postgres_probe if world.startswith("postgres") else None
        yield world, (lambda: probe(world, [])) if probe else (lambda: redis_probe(world))
        return
    yield world, _no_probe


async def _no_probe() -> Probe:
    return Probe()


@contextlib.contextmanager
def _postgres(through_pgbouncer: bool) -> Iterator[tuple[str, MakeProbe]]:
    from tests.support.pgbouncer_server import start_pgbouncer
    from tests.support.postgres_server import start_postgres

    server = start_postgres()
    bouncer = start_pgbouncer(server, "transaction") if through_pgbouncer else None
    try:
        if bouncer is None:
            yield server.url, lambda: postgres_probe(server.url, [])
        else:
            listen = quote(server.url, safe="")
            url = f"{bouncer.url}?pooler=transaction&listen_url={listen}"
            pid = bouncer.pid()
            yield url, lambda: postgres_probe(server.url, [pid] if pid else [])
    finally:
        if bouncer is not None:
            bouncer.stop()
        server.stop()
