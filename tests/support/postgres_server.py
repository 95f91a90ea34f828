"""A real PostgreSQL server for tests and benchmarks, with faults on demand.

``start_postgres()`` gives a :class:`PostgresServer`:

* when a Docker daemon answers a ping: a testcontainers container (image from
  ``FXWORLD_TEST_POSTGRES_IMAGE``, default ``postgres:16``) bound to a fixed free port,
  so a restart keeps its URL;
* otherwise a throwaway cluster from the local binaries (``initdb`` + ``pg_ctl`` in a
  temp dir, 127.0.0.1, a free port). As root, the cluster runs as the ``postgres``
  user (created if missing) or ``nobody``: initdb refuses to run as root.

Both are set up like the official image: user ``fxworld``, database ``fxworld`` and a
password that is neither (:data:`PASSWORD`), required over TCP with scram-sha-256
(``pg_hba``), so a client that drops the password fails here as it would on CI's
containers. ``fsync=False`` (the default) turns ``fsync`` and ``full_page_writes``
off for speed in either; ``fsync=True`` leaves the server's defaults.

Faults: :meth:`PostgresServer.crash_restart` (``pg_ctl stop -m immediate`` and start:
crash recovery), :meth:`PostgresServer.cut_connections` (``pg_terminate_backend`` of
every other client connection). Any failure to start raises: CI must never skip.

Run as a script to get a server until Ctrl-C: ``python -m tests.support.postgres_server``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.support.ports import free_port
from tests.support.server import Container, Server, serve_until_interrupted

__all__ = ["PostgresServer", "start_postgres", "find_pg_bin", "unprivileged_user"]

USER = "fxworld"
DATABASE = "fxworld"
PASSWORD = "pg-test-secret"
"""Distinct from the user and the database, as a real deployment's would be."""


def find_pg_bin() -> Path:
    """The directory of ``initdb``/``pg_ctl``: ``$FXWORLD_PG_BIN``, the PATH, or the newest
    ``/usr/lib/postgresql/*/bin``."""
    env = os.environ.get("FXWORLD_PG_BIN")
    if env:
        return Path(env)

    def version(p: str) -> int:
        name = Path(p).parent.parent.name
        return int(name) if name.isdigit() else 0

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=version)
    if not found:
        on_path = shutil.which("initdb")
        if on_path:
            return Path(on_path).resolve().parent
        raise RuntimeError(
            "no PostgreSQL binaries found (initdb): install postgresql or set FXWORLD_PG_BIN"
        )
    return Path(found[-1]).parent


def docker_available() -> bool:
    """True only if a Docker daemon answers a ping (a ``docker`` binary is not enough)."""
    try:
        import docker  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=3)
        ok = bool(client.ping())
        client.close()
        return ok
    except Exception:
        return False


class PostgresServer(Server):
    """A running PostgreSQL server. ``url`` is a ``postgresql://`` URL for its database.
    :meth:`kill` stops it with no clean shutdown, so :meth:`crash_restart` runs the
    server's crash recovery."""

    name = "PostgreSQL"

    def __init__(self, host: str, port: int, user: str, password: str, database: str) -> None:
        self.host, self.port, self.user, self.password, self.database = (
            host,
            port,
            user,
            password,
            database,
        )

    @property
    def url(self) -> str:
        auth = f"{self.user}:{self.password}" if self.password else self.user
        return f"postgresql://{auth}@{self.host}:{self.port}/{self.database}"

    def cut_connections(self) -> int:
        """Terminate every other client connection to the server; returns how many."""
        import asyncio

        import asyncpg

        async def cut() -> int:
            conn = await asyncpg.connect(
                host=self.host,
                port=self.port,
                user=self.user,
                password=self.password or None,
                database=self.database,
            )
            try:
                value = await conn.fetchval(
                    "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
                    "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
                )
                return int(value)
            finally:
                await conn.close()

        return asyncio.run(cut()) if not _loop_running() else _run_in_thread(cut)

    async def acut_connections(self) -> int:
        """:meth:`cut_connections` from async code."""
        import asyncio

        return await asyncio.to_thread(self.cut_connections)

    def ready(self) -> bool:
        """The server accepts a connection and a login to its database."""
        with socket.create_connection((self.host, self.port), timeout=1):
            pass
        return self._accepts_queries()

    def _accepts_queries(self) -> bool:
        import asyncio

        import asyncpg

        async def probe() -> bool:
            try:
                conn = await asyncpg.connect(
                    host=self.host,
                    port=self.port,
                    user=self.user,
                    password=self.password or None,
                    database=self.database,
                    timeout=3,
                )
            except Exception:
                return False
            await conn.close()
            return True

        return asyncio.run(probe()) if not _loop_running() else _run_in_thread(probe)


def _loop_running() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _run_in_thread(fn: Any) -> Any:
    import asyncio
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(fn())).result()


class LocalPostgres(PostgresServer):
    """A throwaway cluster from the local binaries, owned by this process."""

    def __init__(self, *, fsync: bool = False) -> None:
        self.bin = find_pg_bin()
        self.root = Path(tempfile.mkdtemp(prefix="fxworld-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as: list[str] = []
        self._fsync = fsync
        super().__init__("127.0.0.1", free_port(), USER, PASSWORD, DATABASE)
        if os.geteuid() == 0:
            owner = unprivileged_user()
            os.chmod(self.root, 0o700)
            shutil.chown(self.root, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", owner.pw_name, "--"]
        self._initdb()
        self.start()

    def _cmd(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        result = subprocess.run(
            [*self._as, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"{Path(args[0]).name} failed ({result.returncode}): "
                f"{result.stdout[-2000:]}{result.stderr[-2000:]}"
                f"\n--- server log ---\n{self.log_tail()}"
            )
        return result.stdout

    def log_tail(self) -> str:
        try:
            return self.log.read_text()[-3000:]
        except OSError:
            return ""

    def _initdb(self) -> None:
        pwfile = self.root / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        if self._as:  # readable by the cluster's owner, like the rest of root
            shutil.chown(pwfile, self.root.stat().st_uid, self.root.stat().st_gid)
        self._cmd(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            USER,
            f"--pwfile={pwfile}",
            "--auth-local=trust",  # the unix socket, as in the image
            "--auth-host=scram-sha-256",  # TCP: the password, as in the image
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )

    def _options(self) -> str:
        opts = [
            f"-p {self.port}",
            "-c listen_addresses=127.0.0.1",
            f"-k {self.root}",
            "-c max_connections=300",
            "-c shared_buffers=64MB",
        ]
        if not self._fsync:
            opts += ["-c fsync=off", "-c full_page_writes=off"]
        return " ".join(opts)

    def start(self) -> None:
        self._cmd(
            str(self.bin / "pg_ctl"),
            "start",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            "120",
            "-o",
            self._options(),
        )
        if not hasattr(self, "_created"):
            self._create_database()
            self._created = True
        self.wait_ready()

    def _create_database(self) -> None:
        import asyncio

        import asyncpg

        async def create() -> None:
            conn = await asyncpg.connect(
                host=self.host,
                port=self.port,
                user=USER,
                password=PASSWORD,
                database="postgres",
                timeout=30,
            )
            try:
                await conn.execute(f'CREATE DATABASE "{DATABASE}"')
            finally:
                await conn.close()

        if _loop_running():
            _run_in_thread(create)
        else:
            asyncio.run(create())

    def kill(self) -> None:
        self._cmd(str(self.bin / "pg_ctl"), "stop", "-D", str(self.data), "-m", "immediate")

    def stop(self) -> None:
        if not self.data.exists():
            return
        self._cmd(str(self.bin / "pg_ctl"), "stop", "-D", str(self.data), "-m", "fast", check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def unprivileged_user() -> pwd.struct_passwd:
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"],
        check=True,
    )
    return pwd.getpwnam("postgres")


class ContainerPostgres(Container, PostgresServer):
    """A testcontainers PostgreSQL (only used when a Docker daemon answers)."""

    def __init__(self, *, fsync: bool = False) -> None:
        try:
            from testcontainers.community.postgres import PostgresContainer
        except ImportError:
            from testcontainers.postgres import PostgresContainer

        image = os.environ.get("FXWORLD_TEST_POSTGRES_IMAGE", "postgres:16")
        port = free_port()
        command = "postgres -c max_connections=300"
        if not fsync:
            command += " -c fsync=off -c full_page_writes=off"
        self._container = (
            PostgresContainer(image, username=USER, password=PASSWORD, dbname=DATABASE, driver=None)
            .with_bind_ports(5432, port)
            .with_command(command)
        )
        self._container.start()
        super().__init__("127.0.0.1", port, USER, PASSWORD, DATABASE)
        self.wait_ready()


def start_postgres(*, fsync: bool = False) -> PostgresServer:
    """A running server: a container if Docker answers, else a local cluster. Raises
    (never skips) when neither can start."""
    if os.environ.get("FXWORLD_TEST_POSTGRES") != "local" and docker_available():
        return ContainerPostgres(fsync=fsync)
    return LocalPostgres(fsync=fsync)


if __name__ == "__main__":  # pragma: no cover
    server = start_postgres(fsync="--fsync" in sys.argv)
    serve_until_interrupted(server.stop, server.url)
