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
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.ports import free_port

__all__ = ["RedisServer", "RedisCluster", "start_redis", "start_cluster", "PASSWORD"]

PASSWORD = "fx-s3cret-pw"


def _redis_binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found: install redis-server and redis-tools (apt)")
    return found


class RedisServer:
    """A running Redis server. ``url`` is its ``redis://`` URL (with the password)."""

    def __init__(self, host: str, port: int, password: str) -> None:
        self.host, self.port, self.password = host, port, password

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}{self.host}:{self.port}/0"

    def kill(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def crash_restart(self) -> None:
        """SIGKILL the server and start it again: it reloads its AOF."""
        self.kill()
        self.start()

    def cut_connections(self) -> int:
        """Close every client connection but the one asking; returns how many."""
        import redis

        c = redis.Redis(host=self.host, port=self.port, password=self.password or None)
        try:
            return int(c.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"))
        finally:
            c.close()

    async def acrash_restart(self) -> None:
        import asyncio

        await asyncio.to_thread(self.crash_restart)

    async def acut_connections(self) -> int:
        import asyncio

        return await asyncio.to_thread(self.cut_connections)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Return once the server answers PING (it has loaded its AOF)."""
        import redis

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            c = redis.Redis(
                host=self.host, port=self.port, password=self.password or None, socket_timeout=2
            )
            try:
                if c.ping():
                    return
            except redis.RedisError as e:
                last = e
            finally:
                c.close()
            time.sleep(0.05)
        raise RuntimeError(f"Redis on {self.host}:{self.port} not ready in {timeout:.0f} s: {last}")


class LocalRedis(RedisServer):
    """``redis-server`` from the OS packages, owned by this process."""

    def __init__(
        self,
        *,
        appendfsync: str = "always",
        password: str = PASSWORD,
        extra: tuple[str, ...] = (),
        root: Path | None = None,
    ) -> None:
        self.binary = _redis_binary("redis-server")
        self.root = root or Path(tempfile.mkdtemp(prefix="fxworld-redis-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self._appendfsync = appendfsync
        self._extra = extra
        self._proc: subprocess.Popen[bytes] | None = None
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
            "--logfile",
            str(self.root / "server.log"),
        ]
        if self.password:
            args += ["--requirepass", self.password]
        return args + list(self._extra)

    def start(self) -> None:
        self._proc = subprocess.Popen(
            self._args(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.root
        )
        try:
            self.wait_ready()
        except RuntimeError as e:
            raise RuntimeError(f"{e}\n--- server log ---\n{self._log_tail()}") from None

    def _log_tail(self) -> str:
        try:
            return (self.root / "server.log").read_text()[-3000:]
        except OSError:
            return ""

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait(30)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


class ContainerRedis(RedisServer):
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

    def kill(self) -> None:
        self._container.get_wrapped_container().kill(signal="SIGKILL")

    def start(self) -> None:
        self._container.get_wrapped_container().start()
        self.wait_ready()

    def stop(self) -> None:
        self._container.stop()


def start_redis(*, appendfsync: str = "always") -> RedisServer:
    """A running server: a container if Docker answers, else a local ``redis-server``.
    Raises (never skips) when neither can start."""
    from tests.support.postgres_server import docker_available

    if os.environ.get("FXWORLD_TEST_REDIS") != "local" and docker_available():
        return ContainerRedis(appendfsync=appendfsync)
    return LocalRedis(appendfsync=appendfsync)


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
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server: RedisServer | RedisCluster = (
        start_cluster() if "--cluster" in sys.argv else start_redis()
    )
    print(server.url, flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
